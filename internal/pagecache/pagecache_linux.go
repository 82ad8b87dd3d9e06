package pagecache

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Pages counts the pages of the named files that are in the page cache,
// and their pages in all, with mincore on a mapping that is never touched
// (so counting does not bring a page in). Empty files have no pages.
func Pages(names ...string) (resident, pages int, err error) {
	for _, n := range names {
		r, p, err := filePages(n)
		if err != nil {
			return 0, 0, err
		}
		resident, pages = resident+r, pages+p
	}
	return resident, pages, nil
}

// Resident is the fraction of the named files' pages in the page cache
// (0 for files with no pages).
func Resident(names ...string) (float64, error) {
	r, p, err := Pages(names...)
	if err != nil || p == 0 {
		return 0, err
	}
	return float64(r) / float64(p), nil
}

// Drop writes back the named files' dirty pages (fdatasync: the kernel
// keeps dirty pages whatever it is advised) and asks the kernel to drop
// their pages from the cache (POSIX_FADV_DONTNEED). The kernel may keep
// some; Resident tells.
func Drop(names ...string) error {
	for _, n := range names {
		f, err := os.Open(n)
		if err != nil {
			return err
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			f.Close()
			return fmt.Errorf("pagecache: fdatasync %s: %w", n, err)
		}
		err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
		if err != nil {
			return fmt.Errorf("pagecache: posix_fadvise %s: %w", n, err)
		}
	}
	return nil
}

func filePages(name string) (resident, pages int, err error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return 0, 0, err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, 0, fmt.Errorf("pagecache: mmap %s: %w", name, err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return 0, 0, fmt.Errorf("pagecache: mincore %s: %w", name, errno)
	}
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident, len(vec), nil
}
