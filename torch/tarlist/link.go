package tarlist

import (
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Links inside a tar. torch reads "storages" and "tensors" with
// tar.extract (to a fresh temporary directory) and "pickle" with
// tar.extractfile. For a hard link ('1') or symbolic link ('2') member,
// extractfile returns the file object of TarFile._find_link_target, and
// extract falls back to extracting that member whenever it cannot make the
// link (a hard link to a file not yet extracted, a symlink where symlinks
// are not allowed). _find_link_target looks the target up with
// _getmember(normalize=True): os.path.normpath of the link name (a
// symlink's name joined to the directory of the link) compared with
// os.path.normpath of each member name, from the last member back; a hard
// link only searches the members before it, a symlink the whole archive.
// A target that is a link again is followed the same way (Python recurses
// until RecursionError on a loop).

// maxTarLinkDepth bounds the links followed from one member.
const maxTarLinkDepth = 64

// pyNormpath is posixpath.normpath.
func pyNormpath(p string) string {
	if p == "" {
		return "."
	}
	initial := 0
	if strings.HasPrefix(p, "/") {
		initial = 1
		if strings.HasPrefix(p, "//") && !strings.HasPrefix(p, "///") {
			initial = 2
		}
	}
	var comps []string
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." {
			continue
		}
		if c != ".." || (initial == 0 && len(comps) == 0) || (len(comps) > 0 && comps[len(comps)-1] == "..") {
			comps = append(comps, c)
		} else if len(comps) > 0 {
			comps = comps[:len(comps)-1]
		}
	}
	out := strings.Repeat("/", initial) + strings.Join(comps, "/")
	if out == "" {
		return "."
	}
	return out
}

// pyDirname is posixpath.dirname.
func pyDirname(p string) string {
	i := strings.LastIndexByte(p, '/') + 1
	head := p[:i]
	if head != "" && head != strings.Repeat("/", len(head)) {
		head = strings.TrimRight(head, "/")
	}
	return head
}

// Index is one listing with the lookups tarfile's _getmember makes,
// indexed: a listing can hold millions of members, and every member a
// reader asks for may be resolved.
type Index struct {
	ms   []Member
	norm map[string][]int // normpath(name) -> indices, ascending
	last map[string]int   // exact name -> last index (getmember)
}

// NewIndex indexes a listing (one variant's, as List returns it).
func NewIndex(ms []Member) *Index {
	l := &Index{ms: ms, norm: map[string][]int{}, last: map[string]int{}}
	for i, m := range ms {
		n := pyNormpath(m.Name)
		l.norm[n] = append(l.norm[n], i)
		l.last[m.Name] = i
	}
	return l
}

// linkTarget is _find_link_target: the index of the member link i points
// to, or -1; want is the normalised name looked up.
func (l *Index) linkTarget(i int) (j int, want string) {
	m := l.ms[i]
	name, limit := m.Linkname, i
	if m.Type == '2' {
		var parts []string
		for _, s := range []string{pyDirname(m.Name), m.Linkname} {
			if s != "" {
				parts = append(parts, s)
			}
		}
		name, limit = strings.Join(parts, "/"), len(l.ms)
	}
	want = pyNormpath(name)
	idx := l.norm[want]
	k := sort.SearchInts(idx, limit) // the last one before limit
	if k == 0 {
		return -1, want
	}
	return idx[k-1], want
}

// Resolve returns the members whose data a reader of member i may get:
// i itself if it holds data, else what its link chain leads to. extracted
// names members tar.extract already wrote to disk (torch extracts
// "storages" before "tensors"): a link to one of them also reads that file,
// the last member of the name. notes explain links that lead nowhere;
// outside are the indices of the links on the way whose target is outside
// the archive (absolute, or above it): tar.extract makes such a link as it
// is, and a reader then opens a file of the host through it.
func (l *Index) Resolve(i int, extracted ...string) (out []int, notes []string, outside []int) {
	ms := l.ms
	visited := map[int]bool{}
	var visit func(i, depth int)
	visit = func(i, depth int) {
		if visited[i] {
			if !IsRegularType(ms[i].Type) {
				notes = append(notes, "the links form a loop (Python stops with a RecursionError)")
			}
			return
		}
		visited[i] = true
		m := ms[i]
		if IsRegularType(m.Type) {
			out = append(out, i)
			return
		}
		if m.Type != '1' && m.Type != '2' {
			return
		}
		if depth >= maxTarLinkDepth {
			notes = append(notes, "the link chain is too long to follow")
			return
		}
		j, want := l.linkTarget(i)
		if strings.HasPrefix(want, "/") || want == ".." || strings.HasPrefix(want, "../") {
			notes = append(notes, "the link "+strconv.Quote(m.Linkname)+" points outside the archive (torch would read a file of the host)")
			outside = append(outside, i)
		}
		if j >= 0 {
			visit(j, depth+1)
		} else {
			notes = append(notes, "link target "+strconv.Quote(want)+" is not in the archive")
		}
		if k, ok := l.last[want]; ok && slices.Contains(extracted, want) {
			visit(k, depth+1)
		}
	}
	visit(i, 0)
	return out, notes, outside
}
