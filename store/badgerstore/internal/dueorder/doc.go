// Package dueorder walks badgerstore's due index in due order, over one Badger snapshot: the d/
// index of a store without a classifier (WalkIndex), and the merge of the class index's classes
// in one with (WalkClasses, ClassHeadsAt). A sweep pass's IterateDue, the floored scan and the
// floor's head all read the rows through it.
//
// Invariants. Both walks hand out the due rows in ascending (due, cacheKey) order, from the
// Cursor up to and including now, key-only: the projection is the index entry's inline value, so
// no schedule row and no value-log entry is read. They stop at maxRows, at the first row past
// now (the next due time), at the end of the index or at the first error, and report it in
// Stats; a capped walk still reports the true first due row, because the order is ascending.
// The merge reads a class only once its Bound (B1: no row of the class is due before it, kept
// by badgerstore's floor protocol) comes first, so it is exactly the d/ order it replaces; with
// invariants enabled both walks panic on a row out of order. The package only reads: it never
// writes, and never opens a transaction of its own.
package dueorder
