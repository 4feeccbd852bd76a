// Package cachekey is the identity of a target: its cache key, the device name and the
// normalised URL joined by Separator ("mobile|https://a.test/c/x").
//
// Every key freshq stores, leases or renders is built by New and taken apart by Split, so the
// format lives here and nowhere else. Invariants:
//   - A key holds exactly one Separator: a device name never contains one (ValidDevice, which
//     the configuration checks every device name with), and the URL is everything after the
//     first one.
//   - The URL of a key is in the form Rules.Normalize returns under the rules in force, so that
//     one page is one key however it was spelled when it was submitted. When the rules change,
//     stored keys made under the old ones are found and moved by the keys check and migrate
//     (intake.Targets.CheckKeys and MigrateKeys), not silently orphaned.
//
// The store treats a key as opaque bytes and bounds its length (store.MaxKeyLen); this package
// imports nothing of freshq, so that the configuration and the policy can use it.
package cachekey

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// Separator separates the device from the URL in a cache key.
const Separator = "|"

// SeparatorByte is Separator as a byte, for searches on a hot path (bytes.IndexByte).
const SeparatorByte = '|'

// Key is a cache key. It is a byte slice because the store, the shared-memory ready set and the
// lease table all take keys as bytes.
type Key []byte

// New joins a device name and a normalised URL into a key. The device must be valid
// (ValidDevice) and the URL normalised (NormalizeURL); New does not check either. It is also
// the prefix of every key of that device whose URL starts with url.
func New(device, url string) Key {
	k := make(Key, 0, len(device)+len(Separator)+len(url))
	k = append(k, device...)
	k = append(k, Separator...)
	return append(k, url...)
}

// Split takes a key apart into its device and URL. A key without the separator (New never
// builds one) is all URL: device "" and ok false.
func Split(key []byte) (device, url string, ok bool) {
	i := bytes.IndexByte(key, SeparatorByte)
	if i < 0 {
		return "", string(key), false
	}
	return string(key[:i]), string(key[i+1:]), true
}

// Host returns the host of a key's URL as the URL spells it, with its port if it has one
// (host[:port], the unit politeness counts renders by), sharing key's memory. A key's URL is
// normalised, so the host is lower-case and carries no default port. Userinfo is not part of
// the host. A key whose URL has no "//" authority has the host "".
func Host(key []byte) []byte {
	if i := bytes.IndexByte(key, SeparatorByte); i >= 0 {
		key = key[i+1:]
	}
	i := bytes.Index(key, []byte("//"))
	if i < 0 {
		return nil
	}
	auth := key[i+2:]
	if j := bytes.IndexAny(auth, "/?#"); j >= 0 {
		auth = auth[:j]
	}
	if j := bytes.LastIndexByte(auth, '@'); j >= 0 {
		auth = auth[j+1:]
	}
	return auth
}

// ErrDevice is wrapped by every error of ValidDevice.
var ErrDevice = errors.New("cachekey: bad device name")

// ValidDevice checks that name can be the device of a key: not empty, and without the
// separator, which would make the device impossible to tell from its URL.
func ValidDevice(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrDevice)
	case strings.Contains(name, Separator):
		return fmt.Errorf("%w: %q contains the cache key separator %q", ErrDevice, name, Separator)
	}
	return nil
}

// NormalizeURL is Normalize under the zero Rules: lower-case scheme and host, no default port
// and no fragment, "/" for an empty path, the query sorted; no parameter dropped and no route.
// Code that takes a URL from outside normalises it with the Rules in force instead.
func NormalizeURL(raw string) (string, error) { return (*Rules)(nil).Normalize(raw) }

// DefaultDevice is the device of a target that names none.
const DefaultDevice = "desktop"
