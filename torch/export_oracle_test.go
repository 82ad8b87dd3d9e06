package torch

import "sort"

// AllowlistForOracle returns every allowlisted global, sorted: the oracle
// tests (oracle_test.go) hand exactly this list to real torch's audit hook,
// so the two lists cannot drift.
func AllowlistForOracle() []string {
	names := make([]string, 0, len(allowlist))
	for n := range allowlist {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
