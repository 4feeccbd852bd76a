package store

// MaxKeyLen is the longest cacheKey the store accepts, in bytes. It bounds the size of every
// key in the keyspace (the longest, a due-index key, is 2+8+MaxKeyLen bytes) and is far above
// what a device name plus a normalised URL needs. Longer keys are refused with ErrKeyTooLong,
// never truncated.
const MaxKeyLen = 2048

// validateKey checks a cacheKey against the limits every key must meet.
func validateKey(cacheKey []byte) error {
	switch {
	case len(cacheKey) == 0:
		return ErrEmptyKey
	case len(cacheKey) > MaxKeyLen:
		return ErrKeyTooLong
	}
	return nil
}

// ValidateKey refuses a cacheKey the store cannot hold: empty (ErrEmptyKey) or over MaxKeyLen
// (ErrKeyTooLong). Every backend checks keys with it.
func ValidateKey(cacheKey []byte) error { return validateKey(cacheKey) }

// PrefixEnd is the smallest byte string greater than every string starting with prefix (the
// exclusive upper bound of the prefix's key range), and false when there is none: prefix is
// empty or all 0xff, and its range runs to the end of the key space.
func PrefixEnd(prefix []byte) ([]byte, bool) {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1], true
		}
	}
	return nil, false
}
