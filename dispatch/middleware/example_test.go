package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/dispatch/middleware"
	"github.com/aggflow/aggflow/flux"
)

// deposit is an exchange addressed to one account.
type deposit struct {
	account aggregate.ID
	amount  int
}

func (d deposit) AggregateID() aggregate.ID { return d.account }

func depositsOf(names ...string) []deposit {
	var ds []deposit
	for i := 1; i <= 3; i++ {
		for _, name := range names {
			ds = append(ds, deposit{aggregate.NewID(accounts, name), i * 10})
		}
	}
	return ds
}

// ledger applies deposits; its store fails the first two writes of
// alice's 20.
type ledger struct {
	mu      sync.Mutex
	history map[string][]int
	flaky   int
}

func (l *ledger) apply(_ context.Context, x deposit) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if x.account.ID == "alice" && x.amount == 20 && l.flaky < 2 {
		l.flaky++
		return errors.New("store unavailable")
	}
	l.history[x.account.ID] = append(l.history[x.account.ID], x.amount)
	return nil
}

func (l *ledger) print() {
	names := make([]string, 0, len(l.history))
	for name := range l.history {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Println(name, l.history[name])
	}
}

// runDeposits runs a dispatcher of the deposits of names with handler h
// until every deposit ended, and returns its stats.
func runDeposits(h dispatch.Handler[deposit], names ...string) dispatch.Stats {
	d, err := dispatch.New("deposits", accounts, flux.FromSlice(depositsOf(names...)), h,
		dispatch.WithLogger(discardLogger))
	if err != nil {
		panic(err)
	}
	if err := d.Prepare(context.Background()); err != nil {
		panic(err)
	}
	if err := d.Start(); err != nil {
		panic(err)
	}
	<-d.Done()
	return d.Stats()
}

// A deposit that fails transiently is retried inside its handler call, so
// alice's 30 waits for her 20 to succeed: the order of each account holds.
func ExampleRetry() {
	l := &ledger{history: map[string][]int{}}
	retry, err := middleware.Retry(
		middleware.WithBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }),
		middleware.WithMaxTries(5),
		middleware.WithOnAttempt(func(_ context.Context, x deposit, a middleware.Attempt) {
			fmt.Printf("%s %d: attempt %d: %v, next in %v\n", x.account.ID, x.amount, a.Number, a.Err, a.Next)
		}))
	if err != nil {
		panic(err)
	}
	stats := runDeposits(middleware.Chain(l.apply, retry), "alice", "bob")
	l.print()
	fmt.Printf("%+v\n", stats)
	// Output:
	// alice 20: attempt 1: store unavailable, next in 1ms
	// alice 20: attempt 2: store unavailable, next in 1ms
	// alice [10 20 30]
	// bob [10 20 30]
	// {Received:6 Succeeded:6 Failed:0 Discarded:0 InFlight:0}
}

// A deposit that keeps failing is parked once its retries ran out, and
// counts as handled: the account goes on with its next deposit.
func ExampleDeadLetter() {
	var parked []string
	deadLetter, err := middleware.DeadLetter(func(_ context.Context, x deposit, err error) error {
		parked = append(parked, fmt.Sprintf("%s %d: %v", x.account.ID, x.amount, err))
		return nil // parked: handled
	})
	if err != nil {
		panic(err)
	}
	retry, err := middleware.Retry[deposit](
		middleware.WithBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }),
		middleware.WithMaxTries(3))
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	var applied []int
	poisoned := func(_ context.Context, x deposit) error {
		if x.amount == 20 {
			return errors.New("invalid amount")
		}
		mu.Lock()
		defer mu.Unlock()
		applied = append(applied, x.amount)
		return nil
	}
	stats := runDeposits(middleware.Chain(poisoned, deadLetter, retry), "alice")
	fmt.Println(parked)
	fmt.Println(applied)
	fmt.Printf("%+v\n", stats)
	// Output:
	// [alice 20: middleware: retries exhausted after attempt 3: invalid amount]
	// [10 30]
	// {Received:3 Succeeded:3 Failed:0 Discarded:0 InFlight:0}
}

// Each attempt gets its own deadline: a handler that waits on its ctx is
// ended, and its error says so.
func ExampleTimeout() {
	timeout, err := middleware.Timeout[deposit](10 * time.Millisecond)
	if err != nil {
		panic(err)
	}
	h := timeout(func(ctx context.Context, x deposit) error {
		<-ctx.Done() // a call that hangs until its deadline
		return ctx.Err()
	})
	err = h(context.Background(), deposit{})
	fmt.Println(err)
	fmt.Println(errors.Is(err, middleware.ErrTimeout), errors.Is(err, context.DeadlineExceeded))
	// Output:
	// middleware: timeout after 10ms: context deadline exceeded
	// true true
}

// Chain puts the first listed outermost.
func ExampleChain() {
	step := func(name string) middleware.Middleware[deposit] {
		return func(h dispatch.Handler[deposit]) dispatch.Handler[deposit] {
			return func(ctx context.Context, x deposit) error {
				fmt.Println("enter", name)
				defer fmt.Println("leave", name)
				return h(ctx, x)
			}
		}
	}
	h := middleware.Chain(func(context.Context, deposit) error {
		fmt.Println("handle")
		return nil
	}, step("outer"), step("inner"))
	_ = h(context.Background(), deposit{})
	// Output:
	// enter outer
	// enter inner
	// handle
	// leave inner
	// leave outer
}
