// Package yamlfile is what config reads of a YAML file around decoding it: the bounds that make
// parsing a file cost no more than its size says (BoundDepth on the bytes, before any parse;
// BoundAliases on the parsed tree, before anything expands an alias), and the line of the key
// at a dotted path (Line), which every error about a value names.
//
// Invariants: BoundDepth scans the bytes once without parsing them and errs towards depth;
// BoundAliases reads the tree only, never expanding an alias, so its work and memory are
// linear in the file; Line never fails (0 is "no line"). It imports nothing of freshq: config
// wraps its refusals into config.ErrInvalid and config.FieldError, so callers see only config.
package yamlfile
