//go:build !cuda

package main

// deviceCount is 0: this library is built without CUDA.
func deviceCount() (int, error) { return 0, nil }

// syncDevice is never reached without CUDA (no device can be attached).
func syncDevice(ordinal int) error { return errNoCUDA }

// driverContext is empty: without CUDA no call changes a thread's context.
type driverContext struct{}

func currentContext() driverContext { return driverContext{} }

func setContext(driverContext) {}
