package otelmetrics

import (
	"errors"

	"github.com/aggflow/aggflow/dispatch"
)

var (
	// ErrInvalidArgument: a nil meter provider, a nil dispatcher, or a
	// dispatcher whose Name is empty or panicked.
	ErrInvalidArgument = errors.New("otelmetrics: invalid argument")
	// ErrInvalidOption: a namespace that is not an instrument name prefix,
	// or histogram buckets that are not finite and strictly increasing.
	ErrInvalidOption = errors.New("otelmetrics: invalid option")
	// ErrDuplicate: a dispatcher of that name is registered already.
	ErrDuplicate = errors.New("otelmetrics: dispatcher already registered")
	// ErrMeter: the meter refused to create an instrument or a callback.
	ErrMeter = errors.New("otelmetrics: meter failed")
)

// PanicError is a recovered panic of a registered dispatcher's methods, read
// at collection: dispatch.PanicError, with the panic value (Value) and the
// stack (Stack).
type PanicError = dispatch.PanicError
