// Package pagecache tells how much of a file is in the page cache and
// drops it from there: what tests and benchmarks of cold reads need to
// start cold and to see where a read went (O_DIRECT leaves the cache as it
// was, a buffered read fills it). Linux only (mincore, posix_fadvise);
// elsewhere the package is empty.
package pagecache
