package middleware_test

import (
	"context"
	"testing"

	"github.com/cenkalti/backoff/v5"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/dispatch/middleware"
)

func succeed(context.Context, job) error { return nil }

// benchCall measures one call of h per iteration.
func benchCall(b *testing.B, h dispatch.Handler[job]) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := h(ctx, job{}); err != nil {
			b.Fatal(err)
		}
	}
}

// The per-exchange cost of each middleware when the first attempt
// succeeds, against the bare handler.
func BenchmarkSuccess(b *testing.B) {
	dl := deadLetter(b, func(context.Context, job, error) error { return nil })
	b.Run("handler", func(b *testing.B) { benchCall(b, succeed) })
	b.Run("Retry", func(b *testing.B) { benchCall(b, retry(b)(succeed)) })
	b.Run("Retry/no-elapsed-bound", func(b *testing.B) {
		benchCall(b, retry(b, middleware.WithMaxElapsedTime(0))(succeed))
	})
	b.Run("Timeout", func(b *testing.B) { benchCall(b, timeout(b, 1<<40)(succeed)) })
	b.Run("DeadLetter", func(b *testing.B) { benchCall(b, dl(succeed)) })
	b.Run("DeadLetter+Retry+Timeout", func(b *testing.B) {
		benchCall(b, middleware.Chain(succeed, dl, retry(b), timeout(b, 1<<40)))
	})
}

// The cost of one retry with no wait: an exchange whose first attempt fails
// and second succeeds.
func BenchmarkOneRetry(b *testing.B) {
	zero := middleware.WithBackOff(func() backoff.BackOff { return &backoff.ZeroBackOff{} })
	failOnce := func() dispatch.Handler[job] {
		odd := false
		return func(context.Context, job) error {
			if odd = !odd; odd {
				return errTransient
			}
			return nil
		}
	}
	b.Run("Retry", func(b *testing.B) { benchCall(b, retry(b, zero)(failOnce())) })
}
