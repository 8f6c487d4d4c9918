//go:build linux && (mips64 || mips64le)

package sqlite

// sysFaccessat2 is faccessat2's system call number in the n64 ABI.
const sysFaccessat2 = 5439
