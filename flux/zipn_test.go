package flux_test

import (
	"fmt"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

// Reactor's FluxZipTest cases over three and four sources and over an
// array of them (zip3, zip4, sameLength, differentLength, emptyNonEmpty,
// nonEmptyAndEmpty, zipEmpty, zipHide, failCombinedError, the errors of a
// source).
func TestZip3Zip4ZipN(t *testing.T) {
	leakFree(t)
	tuple3 := func(a int, b string, c bool) string { return fmt.Sprintf("%d %s %t", a, b, c) }
	tuple4 := func(a, b, c, d int) int { return 1000*a + 100*b + 10*c + d }
	testkit.Verify(t, flux.Zip3(flux.Just(1), flux.Just("2"), flux.Just(true), tuple3)).ExpectNext("1 2 true").ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Zip4(flux.Just(1), flux.Just(2), flux.Just(3), flux.Just(4), tuple4)).ExpectNext(1234).ExpectComplete().VerifyT()
	// differentLength: the shortest source ends the flow.
	testkit.Verify(t, flux.Zip3(flux.Just(1, 2), flux.Just("a", "b", "c"), flux.Just(true, false, true, false), tuple3)).
		ExpectNext("1 a true", "2 b false").ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Zip4(flux.Range(1, 5), flux.Range(1, 4), flux.Range(1, 3), flux.Range(1, 9), tuple4)).
		ExpectNext(1111, 2222, 3333).ExpectComplete().VerifyT()
	// emptyNonEmpty / nonEmptyAndEmpty
	testkit.Verify(t, flux.Zip3(flux.Empty[int](), flux.Just("a"), flux.Just(true), tuple3)).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Zip4(flux.Just(1), flux.Just(2), flux.Just(3), flux.Empty[int](), tuple4)).ExpectComplete().VerifyT()
	// A source's error, the combinator's panic (failCombinedError), a nil combinator.
	testkit.Verify(t, flux.Zip3(flux.Just(1), flux.Just("a"), flux.Error[bool](errBoom), tuple3)).ExpectErrorIs(errBoom).VerifyT()
	testkit.Verify(t, flux.Zip4(flux.Error[int](errBoom), flux.Just(2), flux.Just(3), flux.Just(4), tuple4)).ExpectErrorIs(errBoom).VerifyT()
	requirePanicError(t, flux.Zip3(flux.Just(1), flux.Just("a"), flux.Just(true), func(int, string, bool) int { panic("boom") }))
	requirePanicError(t, flux.Zip4(flux.Just(1), flux.Just(2), flux.Just(3), flux.Just(4), func(int, int, int, int) int { panic("boom") }))
	testkit.Verify(t, flux.Zip3[int, int, int, int](flux.Just(1), flux.Just(2), flux.Just(3), nil)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	testkit.Verify(t, flux.Zip4[int, int, int, int, int](flux.Just(1), flux.Just(2), flux.Just(3), flux.Just(4), nil)).ExpectErrorIs(flux.ErrInvalidArgument).VerifyT()
	// ZipN: zipEmpty, zipHide (one source), sameLength, differentLength, an error.
	testkit.Verify(t, flux.ZipN[int](nil)).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.ZipN([]flux.Flux[int]{flux.Just(1)})).ExpectNext([]int{1}).ExpectComplete().VerifyT()
	src := flux.Just(1, 2)
	testkit.Verify(t, flux.ZipN([]flux.Flux[int]{src, src})).ExpectNext([]int{1, 1}, []int{2, 2}).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.ZipN([]flux.Flux[int]{flux.Range(1, 3), flux.Range(10, 2), flux.Range(100, 5)})).
		ExpectNext([]int{1, 10, 100}, []int{2, 11, 101}).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.ZipN([]flux.Flux[int]{flux.Just(1), flux.Just(2), flux.Error[int](errBoom)})).ExpectErrorIs(errBoom).VerifyT()
}

// Every item pulled by Zip3, Zip4 or ZipN is combined or discarded, once,
// under every ending, as for Zip: the rounds held by the nested Zips are
// discarded item by item.
func TestZipNDiscardAccounting(t *testing.T) {
	leakFree(t)
	for _, e := range endings {
		t.Run(e.name, func(t *testing.T) {
			end := e.sourceEnd()
			n := -1
			if e.limit == 0 && e.fail == 0 && e.stop == 0 {
				n = 50
			}
			t.Run("Zip3", func(t *testing.T) {
				account(t, e, true, func(l *ledger) flux.Flux[int] {
					return flux.Zip3(from(l, 0, n, end), from(l, 1_000_000, -1, nil), from(l, 2_000_000, 70, nil), func(a, b, c int) int {
						l.use(b)
						l.use(c)
						return a
					})
				})
			})
			t.Run("Zip4", func(t *testing.T) {
				account(t, e, true, func(l *ledger) flux.Flux[int] {
					return flux.Zip4(from(l, 1_000_000, -1, nil), from(l, 0, n, end), from(l, 2_000_000, 70, nil), from(l, 3_000_000, -1, nil),
						func(a, b, c, d int) int {
							l.use(a)
							l.use(c)
							l.use(d)
							return b
						})
				})
			})
			t.Run("ZipN", func(t *testing.T) {
				account(t, e, true, func(l *ledger) flux.Flux[int] {
					zipped := flux.ZipN([]flux.Flux[int]{from(l, 1_000_000, -1, nil), from(l, 2_000_000, 70, nil), from(l, 0, n, end)})
					return flux.Map(zipped, func(vs []int) int {
						l.use(vs[0])
						l.use(vs[1])
						return vs[2]
					})
				})
			})
		})
	}
}
