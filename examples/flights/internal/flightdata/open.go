package flightdata

import (
	"context"
	"os"
	"path/filepath"
)

// Open decodes the file at path by its extension: ".json" with DecodeJSON,
// ".parquet" with DecodeParquet; any other extension returns an error wrapping
// ErrUnknownFormat. Errors name the path. ctx cancels decoding between
// batches of rows.
func Open(ctx context.Context, path string) (*Dataset, error) {
	ext := filepath.Ext(path)
	if ext != ".json" && ext != ".parquet" {
		return nil, fileError(path, ErrUnknownFormat)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fileError(path, err)
	}
	defer f.Close()
	if ext == ".json" {
		return DecodeJSON(ctx, f, path)
	}
	info, err := f.Stat()
	if err != nil {
		return nil, fileError(path, err)
	}
	return DecodeParquet(ctx, f, info.Size(), path)
}
