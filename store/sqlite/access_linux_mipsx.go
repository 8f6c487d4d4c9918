//go:build linux && (mips || mipsle)

package sqlite

// sysFaccessat2 is faccessat2's system call number in the o32 ABI.
const sysFaccessat2 = 4439
