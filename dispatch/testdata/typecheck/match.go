//go:build !mismatch

package main

type hooked = order
