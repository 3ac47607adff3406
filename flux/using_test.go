package flux_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/stretchr/testify/require"
)

// conn is a resource of the Using tests.
type conn struct {
	id     int
	closed int
}

// pool opens conns and remembers them.
type pool struct{ opened []*conn }

func (p *pool) open() (*conn, error) {
	c := &conn{id: len(p.opened) + 1}
	p.opened = append(p.opened, c)
	return c, nil
}

func closeConn(c *conn) { c.closed++ }

func TestUsing(t *testing.T) {
	leakFree(t)
	items := func(c *conn) flux.Flux[int] { return flux.Just(c.id*10, c.id*10+1) }
	cases := []struct {
		name string
		body func(*conn) flux.Flux[int]
		next func(v int, cancel context.CancelFunc) error
		want error
	}{
		{name: "complete", body: items},
		{name: "error", body: func(c *conn) flux.Flux[int] { return flux.Concat(items(c), flux.Error[int](errBoom)) }, want: errBoom},
		{name: "cancel by the downstream", body: func(*conn) flux.Flux[int] { return endless },
			next: func(int, context.CancelFunc) error { return errStop }, want: errStop},
		{name: "cancel by ctx", body: func(c *conn) flux.Flux[int] { return flux.Concat(items(c), never) },
			next: func(_ int, cancel context.CancelFunc) error { cancel(); return nil }, want: context.Canceled},
		{name: "panic in body", body: func(*conn) flux.Flux[int] { panic("body") }, want: &flux.PanicError{}},
		{name: "panic in the flow", body: func(c *conn) flux.Flux[int] { return flux.Map(items(c), boom[int]) }, want: &flux.PanicError{}},
		{name: "asynchronous body", body: func(c *conn) flux.Flux[int] { return flux.Merge(items(c), failing) }, want: errBoom},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var p pool
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			err := flux.Using(p.open, c.body, closeConn).Subscribe(ctx, func(v int) error {
				if c.next == nil {
					return nil
				}
				return c.next(v, cancel)
			})
			switch want := c.want.(type) {
			case nil:
				require.NoError(t, err)
			case *flux.PanicError:
				require.ErrorAs(t, err, &want)
			default:
				require.ErrorIs(t, err, want)
			}
			require.Len(t, p.opened, 1)
			require.Equal(t, 1, p.opened[0].closed, "closed exactly once")
		})
	}
	t.Run("cleanup before the end goes on", func(t *testing.T) {
		var p pool
		closedAtEnd := -1
		f := flux.Using(p.open, items, closeConn).DoFinally(func(flux.Signal) { closedAtEnd = p.opened[0].closed })
		_, err := flux.Collect(t.Context(), f)
		require.NoError(t, err)
		require.Equal(t, 1, closedAtEnd)
	})
	t.Run("each subscription its resource", func(t *testing.T) {
		var p pool
		f := flux.Using(p.open, items, closeConn)
		for range 3 {
			_, err := flux.Collect(t.Context(), f)
			require.NoError(t, err)
		}
		require.Len(t, p.opened, 3)
	})
	t.Run("resource fails", func(t *testing.T) {
		cleaned := 0
		f := flux.Using(func() (*conn, error) { return nil, errBoom }, items, func(*conn) { cleaned++ })
		_, err := flux.Collect(t.Context(), f)
		require.ErrorIs(t, err, errBoom)
		f = flux.Using(func() (*conn, error) { panic("resource") }, items, func(*conn) { cleaned++ })
		_, err = flux.Collect(t.Context(), f)
		var pe *flux.PanicError
		require.ErrorAs(t, err, &pe)
		require.Zero(t, cleaned, "no resource, no cleanup")
	})
	t.Run("cleanup panics", func(t *testing.T) {
		var p pool
		f := flux.Using(p.open, func(c *conn) flux.Flux[int] { return flux.Error[int](errBoom) }, func(*conn) { panic("cleanup") })
		_, err := flux.Collect(t.Context(), f)
		var pe *flux.PanicError
		require.ErrorAs(t, err, &pe)
		require.ErrorIs(t, err, errBoom)
	})
	t.Run("runtime.Goexit in the flow", func(t *testing.T) {
		var p pool
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = flux.Using(p.open, items, closeConn).Subscribe(context.Background(), func(int) error {
				runtime.Goexit()
				return nil
			})
		}()
		<-done
		require.Equal(t, 1, p.opened[0].closed)
	})
	t.Run("invalid", func(t *testing.T) {
		for _, f := range []flux.Flux[int]{
			flux.Using[*conn, int](nil, items, closeConn),
			flux.Using[*conn, int](new(pool).open, nil, closeConn),
			flux.Using(new(pool).open, items, nil),
		} {
			_, err := flux.Collect(t.Context(), f)
			require.ErrorIs(t, err, flux.ErrInvalidArgument)
		}
	})
}

func ExampleUsing() {
	open := func() (*lineFile, error) { return &lineFile{lines: []string{"a", "b"}}, nil }
	got, err := flux.Collect(context.Background(), flux.Using(open,
		func(f *lineFile) flux.Flux[string] { return flux.FromSlice(f.lines) },
		func(*lineFile) { fmt.Println("closed") }))
	fmt.Println(got, err)
	// Output:
	// closed
	// [a b] <nil>
}

// lineFile is the resource of ExampleUsing.
type lineFile struct{ lines []string }
