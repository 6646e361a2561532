//go:build !unix

package dbhost

func descriptorLimit() uint64 { return 0 }
