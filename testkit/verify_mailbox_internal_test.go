package testkit

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// No flux operator emits after its downstream refused an item or after its
// subscription returned; the mailbox notes any that does, and the run
// fails on it. Only a broken Flux can do it, so the mailbox is driven
// directly.
func TestMailboxNotesItemsAfterTheStop(t *testing.T) {
	errStop := errors.New("stop")
	m := newMailbox[int]()
	m.setAccept(acceptAll)
	require.NoError(t, m.emit(1))
	m.refuse(errStop)
	require.ErrorIs(t, m.emit(2), errStop) // refused: the flux may not know yet
	require.ErrorIs(t, m.emit(3), errStop) // it was told: a broken contract
	m.end(nil)
	require.ErrorIs(t, m.emit(4), errStop)
	err := m.broken()
	require.ErrorIs(t, err, ErrExpectation)
	require.ErrorContains(t, err, "the flow emitted []int{3, 4} after it was told to stop or had ended")

	m = newMailbox[int]()
	require.NoError(t, m.broken())
	m.end(nil)
	require.ErrorIs(t, m.emit(5), errAfterEnd)
	require.ErrorContains(t, m.broken(), "[]int{5}")
}
