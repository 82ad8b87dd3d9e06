package pickle

// memo is the pickle memo. Writers number memo entries sequentially,
// which the dense slice serves; anything else goes to a map.
type memo[T any] struct {
	dense  []T
	sparse map[uint64]T
	count  int // distinct indices set (MEMOIZE uses it as the next index)
}

func (m *memo[T]) get(idx uint64) (T, bool) {
	if idx < uint64(len(m.dense)) {
		return m.dense[idx], true
	}
	v, ok := m.sparse[idx]
	return v, ok
}

func (m *memo[T]) has(idx uint64) bool {
	if idx < uint64(len(m.dense)) {
		return true
	}
	_, ok := m.sparse[idx]
	return ok
}

// put stores v at idx.
func (m *memo[T]) put(idx uint64, v T) {
	switch {
	case idx < uint64(len(m.dense)):
		m.dense[idx] = v
	case idx == uint64(len(m.dense)):
		if _, ok := m.sparse[idx]; ok && m.sparse != nil {
			delete(m.sparse, idx)
		} else {
			m.count++
		}
		m.dense = append(m.dense, v)
		// an index set sparsely before may now continue the dense run
		for len(m.sparse) > 0 {
			n := uint64(len(m.dense))
			w, ok := m.sparse[n]
			if !ok {
				break
			}
			delete(m.sparse, n)
			m.dense = append(m.dense, w)
		}
	default:
		if m.sparse == nil {
			m.sparse = make(map[uint64]T)
		}
		if _, ok := m.sparse[idx]; !ok {
			m.count++
		}
		m.sparse[idx] = v
	}
}

// reset empties the memo, keeping the dense slice's capacity.
func (m *memo[T]) reset() {
	clear(m.dense)
	m.dense = m.dense[:0]
	m.sparse = nil
	m.count = 0
}
