package bench

import "testing"

// TestChosenMix: a reshard line names every mode its pairs chose, the
// most frequent first (a label of only the most frequent one said
// "direct" for three pairs that took direct, hybrid and gather).
func TestChosenMix(t *testing.T) {
	for _, tc := range []struct {
		counts map[string]int
		want   string
	}{
		{map[string]int{"direct": 3}, "direct"},
		{map[string]int{"direct": 1, "hybrid": 1, "gather": 1}, "direct+gather+hybrid"},
		{map[string]int{"direct": 1, "gather": 5}, "gather+direct"},
		{map[string]int{"direct": 0, "gather": 2}, "gather"},
		{map[string]int{}, ""},
	} {
		if got := chosenMix(tc.counts); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.counts, got, tc.want)
		}
	}
}
