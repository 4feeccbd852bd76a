package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat (sysconf(_SC_CLK_TCK), 100 on Linux).
const userHZ = 100

// procStat is what the harness reads of /proc/<pid>/stat.
type procStat struct {
	ppid                         int
	utime, stime, cutime, cstime float64 // seconds
}

// readStat parses /proc/<pid>/stat under root. The command name is in parentheses and may
// itself hold spaces and parentheses, so fields are counted from the last ')'.
func readStat(root string, pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is the state; ppid is field 4 of the man page, utime..cstime are 14..17.
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	var st procStat
	st.ppid, _ = strconv.Atoi(f[1])
	ticks := make([]float64, 4)
	for k := range ticks {
		n, err := strconv.ParseUint(f[11+k], 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("/proc/%d/stat: field %d: %w", pid, 14+k, err)
		}
		ticks[k] = float64(n) / userHZ
	}
	st.utime, st.stime, st.cutime, st.cstime = ticks[0], ticks[1], ticks[2], ticks[3]
	return st, nil
}

// treeCPU returns the CPU seconds used by the process pid and its children: its own time, the
// time of children it has already reaped (cutime+cstime: PostgreSQL backends come and go with
// their connections), and the time of its live children. Grandchildren are not counted live;
// a PostgreSQL postmaster forks every server process itself.
func treeCPU(root string, pid int) (float64, error) {
	top, err := readStat(root, pid)
	if err != nil {
		return 0, fmt.Errorf("reading the server's CPU time: %w", err)
	}
	total := top.utime + top.stime + top.cutime + top.cstime
	entries, err := os.ReadDir(root)
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		st, err := readStat(root, child)
		if err != nil || st.ppid != pid {
			continue // gone since the listing, or not a child
		}
		total += st.utime + st.stime
	}
	return total, nil
}
