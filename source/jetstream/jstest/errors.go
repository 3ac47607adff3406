package jstest

import "errors"

// ErrNotReady is returned by Start when the server did not accept
// connections within the start timeout. It wraps nothing else: the server's
// own log says why.
var ErrNotReady = errors.New("jstest: server not ready")

// ErrStore is returned by Start when the temporary store directory could not
// be made; it wraps the file system's error.
var ErrStore = errors.New("jstest: cannot make the store directory")

// ErrConfig is returned by Start when the server refused its options; it
// wraps the server's error.
var ErrConfig = errors.New("jstest: server options refused")
