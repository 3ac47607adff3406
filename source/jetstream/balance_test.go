package jetstream_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/source/jetstream"
)

func TestFairShare(t *testing.T) {
	for _, c := range []struct{ n, members, want int }{{8, 1, 8}, {8, 2, 4}, {8, 3, 3}, {8, 8, 1}, {8, 9, 1}, {1, 0, 1}, {7, 2, 4}} {
		require.Equal(t, c.want, jetstream.FairShare(c.n, c.members), "%d partitions, %d members", c.n, c.members)
	}
}

// One step of the plan: it releases only what is owned, claims only what is
// free, never both, and lands at most at the share; below the share with
// free partitions, it claims.
func TestPlanStep(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 64).Draw(t, "n")
		members := rapid.IntRange(1, 10).Draw(t, "members")
		var owned, free []int32
		for p := range int32(n) {
			switch rapid.IntRange(0, 2).Draw(t, "whose") {
			case 0:
				owned = append(owned, p)
			case 1:
				free = append(free, p)
			}
		}
		release, claim := jetstream.Plan(n, members, owned, free)
		share := jetstream.FairShare(n, members)
		if len(release) > 0 && len(claim) > 0 {
			t.Fatalf("released %v and claimed %v at once", release, claim)
		}
		for _, p := range release {
			if !slices.Contains(owned, p) {
				t.Fatalf("released %d, not owned", p)
			}
		}
		for _, p := range claim {
			if !slices.Contains(free, p) {
				t.Fatalf("claimed %d, not free", p)
			}
		}
		after := len(owned) - len(release) + len(claim)
		switch {
		case after > share:
			t.Fatalf("%d after the step, above the share %d", after, share)
		case len(owned) > share && after != share:
			t.Fatalf("released down to %d, not to the share %d", after, share)
		case len(owned) < share && len(free) > 0 && len(claim) == 0:
			t.Fatalf("below the share %d with %v free, claimed nothing", share, free)
		}
	})
}

// The members, stepping in any order on a common view, converge: each at
// most the share, every partition owned by exactly one, within a bounded
// number of rounds, whatever they owned at first.
func TestPlanConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 64).Draw(t, "n")
		m := rapid.IntRange(1, 8).Draw(t, "members")
		owner := make([]int, n) // -1: free
		for p := range owner {
			owner[p] = rapid.IntRange(-1, m-1).Draw(t, "owner")
		}
		share := jetstream.FairShare(n, m)
		for round := 0; ; round++ {
			if round > 3 {
				t.Fatalf("not converged after %d rounds: %v", round, owner)
			}
			order := rapid.Permutation(seq(m)).Draw(t, "order")
			moved := false
			for _, who := range order {
				var owned, free []int32
				for p, o := range owner {
					switch o {
					case who:
						owned = append(owned, int32(p))
					case -1:
						free = append(free, int32(p))
					}
				}
				release, claim := jetstream.Plan(n, m, owned, free)
				for _, p := range release {
					owner[p] = -1
				}
				for _, p := range claim {
					owner[p] = who
				}
				moved = moved || len(release)+len(claim) > 0
			}
			if !moved {
				break
			}
		}
		count := make([]int, m)
		for p, o := range owner {
			if o < 0 {
				t.Fatalf("partition %d free at the end: %v", p, owner)
			}
			count[o]++
		}
		for who, c := range count {
			if c > share {
				t.Fatalf("member %d owns %d, above the share %d", who, c, share)
			}
		}
	})
}

func seq(m int) []int {
	s := make([]int, m)
	for i := range s {
		s[i] = i
	}
	return s
}
