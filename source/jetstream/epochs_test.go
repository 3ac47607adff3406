package jetstream_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// record is one line of the file the members of a dynamic assignment
// share: an exchange as a handler saw it, under its partition's lease, in
// the order the handlers ran.
type record struct {
	handled
	epoch  uint64
	member string
}

// epochReport is what checkEpochs found.
type epochReport struct {
	report
	stale int // records of an epoch below one seen before for their key: a stalled owner handled after the next one began
}

// checkEpochs checks records in the order they were handled, across
// processes: an aggregate's records of one epoch (one claim of its
// partition) must follow one another (prev + 1); a later epoch may begin
// at or below the last sequence seen plus one (an in-order replay), never
// above; and once a later epoch began, an earlier one must not handle the
// aggregate again (stale). A stale record is not counted as handled.
func checkEpochs(recs []record, keys []string, perKey uint64) epochReport {
	var r epochReport
	type state struct {
		epoch, prev, last uint64
		seen              map[uint64]bool
	}
	st := map[string]*state{}
	for _, h := range recs {
		r.records++
		if h.attempt > 1 {
			r.redelivered++
		}
		s := st[h.key]
		if s == nil {
			s = &state{seen: map[uint64]bool{}}
			st[h.key] = s
		}
		switch {
		case h.epoch < s.epoch:
			r.stale++
			continue
		case h.epoch > s.epoch && h.seq > s.last+1:
			r.violations++ // a gap at the start of an epoch
		case h.epoch == s.epoch && h.seq != s.prev+1:
			r.violations++
		}
		if h.seq <= s.last {
			r.duplicates++
			if h.attempt < 2 {
				r.firstTry++
			}
		}
		s.epoch, s.prev, s.last = h.epoch, h.seq, max(s.last, h.seq)
		s.seen[h.seq] = true
	}
	for _, k := range keys {
		for q := uint64(1); q <= perKey; q++ {
			if st[k] == nil || !st[k].seen[q] {
				r.lost++
			}
		}
	}
	return r
}

// readRecords parses the members' shared file.
func readRecords(t testing.TB, path string) []record {
	t.Helper()
	var recs []record
	readLines(t, path, 5, func(h handled, f [][]byte) {
		epoch, err := strconv.ParseUint(string(f[3]), 10, 64)
		require.NoError(t, err)
		recs = append(recs, record{h, epoch, string(f[4])})
	})
	return recs
}

func TestCheckEpochsFindsStaleOwnersGapsAndReplays(t *testing.T) {
	keys := []string{"a"}
	rec := func(seq uint64, attempt int, epoch uint64) record {
		return record{handled{"a", seq, attempt}, epoch, "m"}
	}
	clean := []record{rec(1, 1, 5), rec(2, 1, 5), rec(2, 2, 9), rec(3, 1, 9)}
	require.Equal(t, epochReport{report: report{records: 4, redelivered: 1, duplicates: 1}}, checkEpochs(clean, keys, 3))

	stale := []record{rec(1, 1, 5), rec(2, 1, 9), rec(2, 1, 5), rec(3, 1, 9)}
	require.Equal(t, 1, checkEpochs(stale, keys, 3).stale, "epoch 5 handled after epoch 9 began")

	gap := []record{rec(1, 1, 5), rec(3, 1, 9)}
	got := checkEpochs(gap, keys, 3)
	require.Equal(t, 1, got.violations)
	require.Equal(t, 1, got.lost)

	onlyStale := []record{rec(1, 1, 9), rec(2, 1, 5)}
	require.Equal(t, 1, checkEpochs(onlyStale, keys, 2).lost, "a stale record does not count as handled")
}

// A model check: epochs that each replay from at or below where the last
// one got to are clean; a record of an older epoch put after a newer one
// began is caught as stale.
func TestCheckEpochsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.Uint64Range(1, 40).Draw(t, "n")
		var recs []record
		var done, epoch uint64
		for done < n {
			epoch += rapid.Uint64Range(1, 3).Draw(t, "epoch step")
			from := rapid.Uint64Range(1, done+1).Draw(t, "from")
			to := rapid.Uint64Range(max(from, done+1), n).Draw(t, "to")
			for s := from; s <= to; s++ {
				attempt := 1
				if s <= done {
					attempt = 2
				}
				recs = append(recs, record{handled{"k", s, attempt}, epoch, "m"})
			}
			done = to
		}
		r := checkEpochs(recs, []string{"k"}, n)
		if r.violations != 0 || r.lost != 0 || r.firstTry != 0 || r.stale != 0 {
			t.Fatalf("clean epochs reported %+v", r)
		}
		if recs[len(recs)-1].epoch == recs[0].epoch {
			return // one epoch: nothing older to put late
		}
		old := recs[0]
		recs = append(recs, old)
		if r := checkEpochs(recs, []string{"k"}, n); r.stale != 1 {
			t.Fatalf("a late record of epoch %d was not caught: %+v", old.epoch, r)
		}
	})
}
