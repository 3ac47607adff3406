// Package safelog is component's logger guard under the names the modules
// outside the root used before it existed; the root module uses component
// itself.
package safelog

import (
	"log/slog"

	"github.com/aggflow/aggflow/component"
)

// Guard is component.GuardLogger: l with its handler guarded against its
// own panics.
func Guard(l *slog.Logger) *slog.Logger { return component.GuardLogger(l) }

// Panics is component.LoggerPanics.
func Panics(l *slog.Logger) int64 { return component.LoggerPanics(l) }
