// Package tarlist lists tar archives the way Python's tarfile does
// (Python 3.8 to 3.14), including where it differs from other readers.
//
// torch.load's legacy path first tries tarfile.open(fileobj=f, mode="r:")
// on any file that is not a zip: a file whose first header block passes
// tarfile's checks is read as a pre-0.4 tar checkpoint, and its members
// "storages", "tensors" and "pickle" are unpickled. A scanner that must see
// every byte torch might unpickle therefore needs tarfile's answers, not a
// conforming tar reader's: this package reproduces them.
//
// What it models, each as tarfile does it:
//   - header blocks (TarInfo.frombuf): checksums signed or unsigned, the
//     nti number rules (base-256, int(s, 8) with its whitespace and
//     underscores), the V7 directory rule, the prefix field ([ParseHeader],
//     [IsTar]);
//   - extension headers processed recursively (GNU long names 'L'/'K', pax
//     'x'/'X', global pax 'g'): the outermost has the last word; pax
//     numbers parsed by int(str), Unicode digits and spaces included;
//   - the GNU sparse formats: old GNU 'S' with extension blocks, pax 0.0
//     (with older releases' regex over the raw pax data), 0.1 and 1.0, as
//     extractfile reads them ([NewSparseView]) and as tar.extract writes
//     them ([NewExtractView]);
//   - negative sizes as releases before and after gh-130577 handle them,
//     and the other differences between releases ([Variants]);
//   - hard and symbolic links resolved as _find_link_target does
//     ([Index.Resolve]).
//
// [List] lists one release's view; [ListAll] and [ListUnion] every
// release's. Memory and work are bounded (nested extension headers,
// sparse maps, members); where a bound or a Python exception ends a
// listing, the listing says so in its problems.
package tarlist
