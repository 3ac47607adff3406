package aggregate

// Key is an aggregate id with its HashCode, computed once by NewKey, as a
// JVM String keeps its hash: an exchange that holds one is routed without
// hashing its id again (see KeyCapable). It is 24 bytes, comparable, and its
// zero value is the key of the empty id. Safe for concurrent use.
type Key struct {
	id   string
	hash int32
}

// NewKey returns the key of id: it hashes id once (HashCode, in O(len(id))
// and without allocating).
func NewKey(id string) Key { return Key{id: id, hash: HashCode(id)} }

// ID returns the aggregate id.
func (k Key) ID() string { return k.id }

// HashCode returns HashCode(k.ID()), computed by NewKey.
func (k Key) HashCode() int32 { return k.hash }

// Mod returns GroupKey(k.ID(), n) without hashing. It panics when n < 1, as
// GroupKey does.
func (k Key) Mod(n int) int { return floorMod(k.hash, n) }

// String returns the aggregate id.
func (k Key) String() string { return k.id }

// KeyCapable is implemented by exchanges that hold their aggregate id as a
// Key. A dispatcher of New given dispatch.WithAggregateKey routes them by
// AggregateKey rather than by AggregateID: a 24-byte key instead of a
// 64-byte ID, hashed when the key was made rather than at every exchange.
// AggregateKey().ID() must be AggregateID().ID, or the exchange's group and
// order are not those its AggregateID gives.
type KeyCapable interface {
	AggregateKey() Key
}

// MarshalText returns the id, so that a Key encodes as its id (JSON: a
// string).
func (k Key) MarshalText() ([]byte, error) { return []byte(k.id), nil }

// UnmarshalText sets k to NewKey(string(text)): a decoded Key is hashed once,
// as it is decoded.
func (k *Key) UnmarshalText(text []byte) error {
	*k = NewKey(string(text))
	return nil
}
