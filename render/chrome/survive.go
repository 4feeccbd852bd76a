package chrome

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// EnvSurvive names the environment variable that, in a binary built for the end-to-end tests
// (the testclock build tag, testkit/testbin) and only there, starts every browser so that it
// would outlive its render worker: in a session of its own, without the parent-death signal,
// and holding a writer of its own DevTools command pipe, so that the pipe never reads EOF when
// the worker dies. It exists to show that the test of "no Chromium outlives a render worker
// killed with -9" can fail; a production build has no such switch (survive is false).
const EnvSurvive = "FRESHQ_TEST_CHROME_SURVIVE"

// surviveAttr is what EnvSurvive makes of a browser's start: its own session, no parent-death
// signal, and, passed to it as one more descriptor, a writer of its DevTools command pipe (the
// worker's own end, found by the pipe's inode), so that Chromium never reads EOF there. The
// caller closes the returned file once the browser has started.
func surviveAttr(cmd *exec.Cmd, cred *syscall.Credential) (*os.File, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	if len(cmd.ExtraFiles) == 0 || cmd.ExtraFiles[0] == nil {
		return nil, errors.New("chrome: no DevTools pipe to hold open")
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(cmd.ExtraFiles[0].Fd()), &st); err != nil {
		return nil, fmt.Errorf("chrome: the DevTools pipe: %w", err)
	}
	want := fmt.Sprintf("pipe:[%d]", st.Ino)
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, fmt.Errorf("chrome: the DevTools pipe: %w", err)
	}
	for _, e := range entries {
		link, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		info, _ := os.ReadFile(filepath.Join("/proc/self/fdinfo", e.Name()))
		if link != want || !bytes.Contains(info, []byte("flags:\t")) {
			continue
		}
		flags := strings.Fields(string(info[bytes.Index(info, []byte("flags:\t"))+7:]))
		mode, err := strconv.ParseInt(flags[0], 8, 64)
		if err != nil || mode&syscall.O_ACCMODE != syscall.O_WRONLY {
			continue
		}
		fd, _ := strconv.Atoi(e.Name())
		dup, err := syscall.Dup(fd)
		if err != nil {
			return nil, fmt.Errorf("chrome: the DevTools pipe: %w", err)
		}
		w := os.NewFile(uintptr(dup), "devtools-pipe-writer")
		cmd.ExtraFiles = append(cmd.ExtraFiles, w)
		return w, nil
	}
	return nil, errors.New("chrome: the DevTools pipe's writer not found")
}
