//go:build mismatch

package main

type invoice struct{}

type hooked = invoice
