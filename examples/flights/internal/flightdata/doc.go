// Package flightdata decodes US flight records (the Bureau of Transportation
// Statistics on-time data shipped with vega-datasets) from JSON, gzipped JSON
// or Parquet into a compact, in-memory Dataset: one 24-byte Flight per row,
// airport codes interned once into a table so that millions of rows cost no
// string allocation each.
//
// Open (or OpenFS) tells the format from the name and checks what can be
// checked before decoding; Input.Decode then reads every row, reporting its
// progress in bytes when asked. Unknown JSON fields are skipped unless
// Options.Strict.
//
// Every decoding error names the file and, when a row is at fault, the row
// (1-based, in file order) through *RowError.
package flightdata
