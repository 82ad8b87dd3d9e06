package torch

// memo is the pickle memo. torch (and CPython) number memo entries
// sequentially, which the dense slice serves; anything else goes to a map.
type memo struct {
	dense  []any
	sparse map[uint64]any
	count  int // distinct indices set (MEMOIZE uses it as the next index)
}

func (m *memo) get(idx uint64) (any, bool) {
	if idx < uint64(len(m.dense)) {
		return m.dense[idx], true
	}
	v, ok := m.sparse[idx]
	return v, ok
}

// put stores v at idx; it reports false only if the index is unusable.
func (m *memo) put(idx uint64, v any) bool {
	switch {
	case idx < uint64(len(m.dense)):
		m.dense[idx] = v
	case idx == uint64(len(m.dense)):
		if _, ok := m.sparse[idx]; ok {
			delete(m.sparse, idx)
		} else {
			m.count++
		}
		m.dense = append(m.dense, v)
	default:
		if m.sparse == nil {
			m.sparse = make(map[uint64]any)
		}
		if _, ok := m.sparse[idx]; !ok {
			m.count++
		}
		m.sparse[idx] = v
	}
	return true
}
