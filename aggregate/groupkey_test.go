package aggregate_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goldenVectors are Java's String.hashCode and Math.floorMod computed on a JVM;
// java128 is Java's truncating h % 128, kept to show where it differs.
var goldenVectors = []struct {
	id                                      string
	hash                                    int32
	mod1, mod2, mod7, mod64, mod128, mod896 int
	mod1024, java128                        int
}{
	{"", 0, 0, 0, 0, 0, 0, 0, 0, 0},
	{"a", 97, 0, 1, 6, 33, 97, 97, 97, 97},
	{"id", 3355, 0, 1, 2, 27, 27, 667, 283, 27},
	{"0", 48, 0, 0, 6, 48, 48, 48, 48, 48},
	{"order-1", -1207111310, 0, 0, 1, 50, 114, 498, 370, -14},
	{"aggregate-1", 841519011, 0, 1, 4, 35, 35, 291, 931, 35},
	{"message-id", -1690770271, 0, 1, 6, 33, 33, 545, 161, -95},
	{"0U8R3cXnZ0010", -1112199052, 0, 0, 1, 52, 116, 372, 116, -12},
	{"polygenelubricants", -2147483648, 0, 0, 5, 0, 0, 768, 0, 0},
	{"Aa", 2112, 0, 0, 5, 0, 64, 320, 64, 64},
	{"BB", 2112, 0, 0, 5, 0, 64, 320, 64, 64},
	{"订单-1", 1085411543, 0, 1, 6, 23, 87, 727, 215, 87},
	{"😀", 1772899, 0, 1, 2, 35, 99, 611, 355, 99},
	{"café", 3045921, 0, 1, 4, 33, 33, 417, 545, 33},
}

func TestGroupKeyGoldenVectors(t *testing.T) {
	for _, v := range goldenVectors {
		t.Run(strconv.Quote(v.id), func(t *testing.T) {
			assert.Equal(t, v.hash, aggregate.HashCode(v.id), "HashCode")
			assert.Equal(t, v.java128, int(v.hash%128), "Java %% 128")
			for n, want := range map[int]int{1: v.mod1, 2: v.mod2, 7: v.mod7, 64: v.mod64,
				128: v.mod128, 896: v.mod896, 1024: v.mod1024} {
				assert.Equal(t, want, aggregate.GroupKey(v.id, n), "GroupKey(%q, %d)", v.id, n)
				id := aggregate.NewID(aggregate.MaterializedNamedAggregate{Context: "c", Aggregate: "A"}, v.id)
				assert.Equal(t, want, id.Mod(n), "ID.Mod(%d)", n)
				assert.Equal(t, want, aggregate.NewKey(v.id).Mod(n), "Key.Mod(%d)", n)
			}
			k := aggregate.NewKey(v.id)
			assert.Equal(t, v.hash, k.HashCode(), "Key.HashCode")
			assert.Equal(t, v.id, k.ID(), "Key.ID")
		})
	}
}

func TestGroupKeyPanicsBelowOne(t *testing.T) {
	for _, n := range []int{0, -1, -128} {
		assert.PanicsWithValue(t, "aggregate: group count must be at least 1, got "+strconv.Itoa(n),
			func() { aggregate.GroupKey("order-1", n) })
		assert.PanicsWithValue(t, "aggregate: group count must be at least 1, got "+strconv.Itoa(n),
			func() { aggregate.NewKey("order-1").Mod(n) })
	}
}

func TestZeroKeyIsTheEmptyID(t *testing.T) {
	assert.Equal(t, aggregate.NewKey(""), aggregate.Key{})
	assert.Equal(t, "", aggregate.Key{}.ID())
	assert.Equal(t, 0, aggregate.Key{}.Mod(128))
}

func TestHashCodeInvalidUTF8(t *testing.T) {
	for _, s := range []string{"\xff", "a\xffb", "\xed\xa0\x80", "\xf0\x9f\x98", "😀\x80"} {
		assert.Equal(t, referenceHash(s), aggregate.HashCode(s), "%q", s)
	}
	// A lone byte 0xff is one U+FFFD, which hashes to 0xFFFD.
	assert.Equal(t, int32(0xFFFD), aggregate.HashCode("\xff"))
}

// referenceHash is the plain computation the spec gives: Java's hash over
// utf16.Encode([]rune(s)).
func referenceHash(s string) int32 {
	var h int32
	for _, cu := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(cu)
	}
	return h
}

func referenceGroupKey(s string, n int) int {
	k := int64(referenceHash(s)) % int64(n)
	return int((k + int64(n)) % int64(n))
}

func FuzzGroupKey(f *testing.F) {
	for _, v := range goldenVectors {
		f.Add(v.id, uint32(127))
	}
	f.Add("\xed\xa0\x80\xff", uint32(0))
	f.Add("polygenelubricants", uint32(1<<32-1))
	f.Fuzz(func(t *testing.T, id string, m uint32) {
		n := int(m) + 1
		if got := aggregate.GroupKey(id, n); got < 0 || got >= n || got != referenceGroupKey(id, n) {
			t.Fatalf("GroupKey(%q, %d) = %d, reference %d", id, n, got, referenceGroupKey(id, n))
		}
		if got, want := aggregate.HashCode(id), referenceHash(id); got != want {
			t.Fatalf("HashCode(%q) = %d, reference %d", id, got, want)
		}
		if k := aggregate.NewKey(id); k.Mod(n) != referenceGroupKey(id, n) || k.HashCode() != referenceHash(id) || k.ID() != id {
			t.Fatalf("NewKey(%q) = %+v: Mod(%d) %d, reference %d", id, k, n, k.Mod(n), referenceGroupKey(id, n))
		}
	})
}

// The child half of TestDefaultParallelismEnvironment: DefaultParallelism is
// fixed at start-up, so each environment needs a process of its own.
func TestDefaultParallelismChild(t *testing.T) {
	want := os.Getenv("AGGFLOW_TEST_WANT_PARALLELISM")
	if want == "" {
		t.Skip("runs only as a child process of TestDefaultParallelismEnvironment")
	}
	assert.Equal(t, want, strconv.Itoa(aggregate.DefaultParallelism))
}

func TestDefaultParallelismEnvironment(t *testing.T) {
	for env, want := range map[string]string{"": "192", "7": "7", "0": "192", "-5": "192", "x": "192"} {
		t.Run("AGGFLOW_PARALLELISM="+env, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestDefaultParallelismChild$", "-test.v")
			cmd.Env = append(os.Environ(), "GOMAXPROCS=3", "AGGFLOW_PARALLELISM="+env, "AGGFLOW_TEST_WANT_PARALLELISM="+want)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			assert.True(t, strings.Contains(string(out), "--- PASS: TestDefaultParallelismChild"), "%s", out)
		})
	}
}

func BenchmarkGroupKey(b *testing.B) {
	ids := []struct{ name, id string }{
		{"ascii", "order-1"},
		{"uuid", "0f8fad5b-d9cb-469f-a165-70867728950e"},
		{"cjk-emoji", "订单-😀-1"},
	}
	impls := []struct {
		name     string
		groupKey func(string, int) int
	}{{"aggflow", aggregate.GroupKey}, {"utf16-encode", referenceGroupKey}}
	for _, id := range ids {
		for _, impl := range impls {
			b.Run(id.name+"/"+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				var sink int
				for b.Loop() {
					sink += impl.groupKey(id.id, 128)
				}
				_ = sink
			})
		}
	}
}

// A Key encodes as its id and decodes hashed.
func TestKeyTextRoundTrip(t *testing.T) {
	type payment struct {
		Account aggregate.Key `json:"account"`
		Cents   int           `json:"cents"`
	}
	b, err := json.Marshal(payment{aggregate.NewKey("order-1"), 10})
	require.NoError(t, err)
	assert.JSONEq(t, `{"account":"order-1","cents":10}`, string(b))
	var p payment
	require.NoError(t, json.Unmarshal(b, &p))
	assert.Equal(t, aggregate.NewKey("order-1"), p.Account)
	assert.Equal(t, int32(-1207111310), p.Account.HashCode())
}
