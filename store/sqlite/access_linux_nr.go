//go:build linux && !mips && !mipsle && !mips64 && !mips64le

package sqlite

// sysFaccessat2 is faccessat2's system call number (syscall has none to
// export but on loong64).
const sysFaccessat2 = 439
