//! Linux system call numbers by name for the architectures an x86_64 kernel runs: x86_64,
//! i386 and x32 (whose numbers carry `X32_SYSCALL_BIT`, left out here). libseccomp resolves
//! profile names with the same kind of table; a name missing from a column does not exist on
//! that architecture.
//!
//! Source: the kernel's UAPI headers `asm/unistd_64.h`, `asm/unistd_32.h` and
//! `asm/unistd_x32.h` (Linux 6.1), plus what `arch/x86/entry/syscalls/syscall_{64,32}.tbl`
//! added up to Linux 6.17 (`uretprobe`, and 451–469, which are common to all three except
//! `map_shadow_stack`, x86_64 only). One line per name, sorted by name (byte order):
//! `name x86_64 i386 x32`, `-` where there is none.

/// The number of `name` on each architecture.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Numbers {
    pub x86_64: Option<u32>,
    pub i386: Option<u32>,
    /// Without `X32_SYSCALL_BIT`.
    pub x32: Option<u32>,
}

pub fn lookup(name: &str) -> Option<Numbers> {
    let t = table();
    let i = t.binary_search_by(|(n, _)| (*n).cmp(name)).ok()?;
    Some(t[i].1)
}

fn table() -> &'static [(&'static str, Numbers)] {
    static T: std::sync::OnceLock<Vec<(&'static str, Numbers)>> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        TABLE
            .lines()
            .filter_map(|l| {
                let mut f = l.split_ascii_whitespace();
                let name = f.next()?;
                let mut num = || f.next().and_then(|n| n.parse().ok());
                Some((
                    name,
                    Numbers {
                        x86_64: num(),
                        i386: num(),
                        x32: num(),
                    },
                ))
            })
            .collect()
    })
}

const TABLE: &str = "\
_llseek - 140 -
_newselect - 142 -
_sysctl 156 149 -
accept 43 - 43
accept4 288 364 288
access 21 33 21
acct 163 51 163
add_key 248 286 248
adjtimex 159 124 159
afs_syscall 183 137 183
alarm 37 27 37
arch_prctl 158 384 158
bdflush - 134 -
bind 49 361 49
bpf 321 357 321
break - 17 -
brk 12 45 12
cachestat 451 451 451
capget 125 184 125
capset 126 185 126
chdir 80 12 80
chmod 90 15 90
chown 92 182 92
chown32 - 212 -
chroot 161 61 161
clock_adjtime 305 343 305
clock_adjtime64 - 405 -
clock_getres 229 266 229
clock_getres_time64 - 406 -
clock_gettime 228 265 228
clock_gettime64 - 403 -
clock_nanosleep 230 267 230
clock_nanosleep_time64 - 407 -
clock_settime 227 264 227
clock_settime64 - 404 -
clone 56 120 56
clone3 435 435 435
close 3 6 3
close_range 436 436 436
connect 42 362 42
copy_file_range 326 377 326
creat 85 8 85
create_module 174 127 -
delete_module 176 129 176
dup 32 41 32
dup2 33 63 33
dup3 292 330 292
epoll_create 213 254 213
epoll_create1 291 329 291
epoll_ctl 233 255 233
epoll_ctl_old 214 - -
epoll_pwait 281 319 281
epoll_pwait2 441 441 441
epoll_wait 232 256 232
epoll_wait_old 215 - -
eventfd 284 323 284
eventfd2 290 328 290
execve 59 11 520
execveat 322 358 545
exit 60 1 60
exit_group 231 252 231
faccessat 269 307 269
faccessat2 439 439 439
fadvise64 221 250 221
fadvise64_64 - 272 -
fallocate 285 324 285
fanotify_init 300 338 300
fanotify_mark 301 339 301
fchdir 81 133 81
fchmod 91 94 91
fchmodat 268 306 268
fchmodat2 452 452 452
fchown 93 95 93
fchown32 - 207 -
fchownat 260 298 260
fcntl 72 55 72
fcntl64 - 221 -
fdatasync 75 148 75
fgetxattr 193 231 193
file_getattr 468 468 468
file_setattr 469 469 469
finit_module 313 350 313
flistxattr 196 234 196
flock 73 143 73
fork 57 2 57
fremovexattr 199 237 199
fsconfig 431 431 431
fsetxattr 190 228 190
fsmount 432 432 432
fsopen 430 430 430
fspick 433 433 433
fstat 5 108 5
fstat64 - 197 -
fstatat64 - 300 -
fstatfs 138 100 138
fstatfs64 - 269 -
fsync 74 118 74
ftime - 35 -
ftruncate 77 93 77
ftruncate64 - 194 -
futex 202 240 202
futex_requeue 456 456 456
futex_time64 - 422 -
futex_wait 455 455 455
futex_waitv 449 449 449
futex_wake 454 454 454
futimesat 261 299 261
get_kernel_syms 177 130 -
get_mempolicy 239 275 239
get_robust_list 274 312 531
get_thread_area 211 244 -
getcpu 309 318 309
getcwd 79 183 79
getdents 78 141 78
getdents64 217 220 217
getegid 108 50 108
getegid32 - 202 -
geteuid 107 49 107
geteuid32 - 201 -
getgid 104 47 104
getgid32 - 200 -
getgroups 115 80 115
getgroups32 - 205 -
getitimer 36 105 36
getpeername 52 368 52
getpgid 121 132 121
getpgrp 111 65 111
getpid 39 20 39
getpmsg 181 188 181
getppid 110 64 110
getpriority 140 96 140
getrandom 318 355 318
getresgid 120 171 120
getresgid32 - 211 -
getresuid 118 165 118
getresuid32 - 209 -
getrlimit 97 76 97
getrusage 98 77 98
getsid 124 147 124
getsockname 51 367 51
getsockopt 55 365 542
gettid 186 224 186
gettimeofday 96 78 96
getuid 102 24 102
getuid32 - 199 -
getxattr 191 229 191
getxattrat 464 464 464
gtty - 32 -
idle - 112 -
init_module 175 128 175
inotify_add_watch 254 292 254
inotify_init 253 291 253
inotify_init1 294 332 294
inotify_rm_watch 255 293 255
io_cancel 210 249 210
io_destroy 207 246 207
io_getevents 208 247 208
io_pgetevents 333 385 333
io_pgetevents_time64 - 416 -
io_setup 206 245 543
io_submit 209 248 544
io_uring_enter 426 426 426
io_uring_register 427 427 427
io_uring_setup 425 425 425
ioctl 16 54 514
ioperm 173 101 173
iopl 172 110 172
ioprio_get 252 290 252
ioprio_set 251 289 251
ipc - 117 -
kcmp 312 349 312
kexec_file_load 320 - 320
kexec_load 246 283 528
keyctl 250 288 250
kill 62 37 62
landlock_add_rule 445 445 445
landlock_create_ruleset 444 444 444
landlock_restrict_self 446 446 446
lchown 94 16 94
lchown32 - 198 -
lgetxattr 192 230 192
link 86 9 86
linkat 265 303 265
listen 50 363 50
listmount 458 458 458
listxattr 194 232 194
listxattrat 465 465 465
llistxattr 195 233 195
lock - 53 -
lookup_dcookie 212 253 212
lremovexattr 198 236 198
lseek 8 19 8
lsetxattr 189 227 189
lsm_get_self_attr 459 459 459
lsm_list_modules 461 461 461
lsm_set_self_attr 460 460 460
lstat 6 107 6
lstat64 - 196 -
madvise 28 219 28
map_shadow_stack 453 - -
mbind 237 274 237
membarrier 324 375 324
memfd_create 319 356 319
memfd_secret 447 447 447
migrate_pages 256 294 256
mincore 27 218 27
mkdir 83 39 83
mkdirat 258 296 258
mknod 133 14 133
mknodat 259 297 259
mlock 149 150 149
mlock2 325 376 325
mlockall 151 152 151
mmap 9 90 9
mmap2 - 192 -
modify_ldt 154 123 154
mount 165 21 165
mount_setattr 442 442 442
move_mount 429 429 429
move_pages 279 317 533
mprotect 10 125 10
mpx - 56 -
mq_getsetattr 245 282 245
mq_notify 244 281 527
mq_open 240 277 240
mq_timedreceive 243 280 243
mq_timedreceive_time64 - 419 -
mq_timedsend 242 279 242
mq_timedsend_time64 - 418 -
mq_unlink 241 278 241
mremap 25 163 25
mseal 462 462 462
msgctl 71 402 71
msgget 68 399 68
msgrcv 70 401 70
msgsnd 69 400 69
msync 26 144 26
munlock 150 151 150
munlockall 152 153 152
munmap 11 91 11
name_to_handle_at 303 341 303
nanosleep 35 162 35
newfstatat 262 - 262
nfsservctl 180 169 -
nice - 34 -
oldfstat - 28 -
oldlstat - 84 -
oldolduname - 59 -
oldstat - 18 -
olduname - 109 -
open 2 5 2
open_by_handle_at 304 342 304
open_tree 428 428 428
open_tree_attr 467 467 467
openat 257 295 257
openat2 437 437 437
pause 34 29 34
perf_event_open 298 336 298
personality 135 136 135
pidfd_getfd 438 438 438
pidfd_open 434 434 434
pidfd_send_signal 424 424 424
pipe 22 42 22
pipe2 293 331 293
pivot_root 155 217 155
pkey_alloc 330 381 330
pkey_free 331 382 331
pkey_mprotect 329 380 329
poll 7 168 7
ppoll 271 309 271
ppoll_time64 - 414 -
prctl 157 172 157
pread64 17 180 17
preadv 295 333 534
preadv2 327 378 546
prlimit64 302 340 302
process_madvise 440 440 440
process_mrelease 448 448 448
process_vm_readv 310 347 539
process_vm_writev 311 348 540
prof - 44 -
profil - 98 -
pselect6 270 308 270
pselect6_time64 - 413 -
ptrace 101 26 521
putpmsg 182 189 182
pwrite64 18 181 18
pwritev 296 334 535
pwritev2 328 379 547
query_module 178 167 -
quotactl 179 131 179
quotactl_fd 443 443 443
read 0 3 0
readahead 187 225 187
readdir - 89 -
readlink 89 85 89
readlinkat 267 305 267
readv 19 145 515
reboot 169 88 169
recvfrom 45 371 517
recvmmsg 299 337 537
recvmmsg_time64 - 417 -
recvmsg 47 372 519
remap_file_pages 216 257 216
removexattr 197 235 197
removexattrat 466 466 466
rename 82 38 82
renameat 264 302 264
renameat2 316 353 316
request_key 249 287 249
restart_syscall 219 0 219
rmdir 84 40 84
rseq 334 386 334
rt_sigaction 13 174 512
rt_sigpending 127 176 522
rt_sigprocmask 14 175 14
rt_sigqueueinfo 129 178 524
rt_sigreturn 15 173 513
rt_sigsuspend 130 179 130
rt_sigtimedwait 128 177 523
rt_sigtimedwait_time64 - 421 -
rt_tgsigqueueinfo 297 335 536
sched_get_priority_max 146 159 146
sched_get_priority_min 147 160 147
sched_getaffinity 204 242 204
sched_getattr 315 352 315
sched_getparam 143 155 143
sched_getscheduler 145 157 145
sched_rr_get_interval 148 161 148
sched_rr_get_interval_time64 - 423 -
sched_setaffinity 203 241 203
sched_setattr 314 351 314
sched_setparam 142 154 142
sched_setscheduler 144 156 144
sched_yield 24 158 24
seccomp 317 354 317
security 185 - 185
select 23 82 23
semctl 66 394 66
semget 64 393 64
semop 65 - 65
semtimedop 220 - 220
semtimedop_time64 - 420 -
sendfile 40 187 40
sendfile64 - 239 -
sendmmsg 307 345 538
sendmsg 46 370 518
sendto 44 369 44
set_mempolicy 238 276 238
set_mempolicy_home_node 450 450 450
set_robust_list 273 311 530
set_thread_area 205 243 -
set_tid_address 218 258 218
setdomainname 171 121 171
setfsgid 123 139 123
setfsgid32 - 216 -
setfsuid 122 138 122
setfsuid32 - 215 -
setgid 106 46 106
setgid32 - 214 -
setgroups 116 81 116
setgroups32 - 206 -
sethostname 170 74 170
setitimer 38 104 38
setns 308 346 308
setpgid 109 57 109
setpriority 141 97 141
setregid 114 71 114
setregid32 - 204 -
setresgid 119 170 119
setresgid32 - 210 -
setresuid 117 164 117
setresuid32 - 208 -
setreuid 113 70 113
setreuid32 - 203 -
setrlimit 160 75 160
setsid 112 66 112
setsockopt 54 366 541
settimeofday 164 79 164
setuid 105 23 105
setuid32 - 213 -
setxattr 188 226 188
setxattrat 463 463 463
sgetmask - 68 -
shmat 30 397 30
shmctl 31 396 31
shmdt 67 398 67
shmget 29 395 29
shutdown 48 373 48
sigaction - 67 -
sigaltstack 131 186 525
signal - 48 -
signalfd 282 321 282
signalfd4 289 327 289
sigpending - 73 -
sigprocmask - 126 -
sigreturn - 119 -
sigsuspend - 72 -
socket 41 359 41
socketcall - 102 -
socketpair 53 360 53
splice 275 313 275
ssetmask - 69 -
stat 4 106 4
stat64 - 195 -
statfs 137 99 137
statfs64 - 268 -
statmount 457 457 457
statx 332 383 332
stime - 25 -
stty - 31 -
swapoff 168 115 168
swapon 167 87 167
symlink 88 83 88
symlinkat 266 304 266
sync 162 36 162
sync_file_range 277 314 277
syncfs 306 344 306
sysfs 139 135 139
sysinfo 99 116 99
syslog 103 103 103
tee 276 315 276
tgkill 234 270 234
time 201 13 201
timer_create 222 259 526
timer_delete 226 263 226
timer_getoverrun 225 262 225
timer_gettime 224 261 224
timer_gettime64 - 408 -
timer_settime 223 260 223
timer_settime64 - 409 -
timerfd_create 283 322 283
timerfd_gettime 287 326 287
timerfd_gettime64 - 410 -
timerfd_settime 286 325 286
timerfd_settime64 - 411 -
times 100 43 100
tkill 200 238 200
truncate 76 92 76
truncate64 - 193 -
tuxcall 184 - 184
ugetrlimit - 191 -
ulimit - 58 -
umask 95 60 95
umount - 22 -
umount2 166 52 166
uname 63 122 63
unlink 87 10 87
unlinkat 263 301 263
unshare 272 310 272
uretprobe 335 - -
uselib 134 86 -
userfaultfd 323 374 323
ustat 136 62 136
utime 132 30 132
utimensat 280 320 280
utimensat_time64 - 412 -
utimes 235 271 235
vfork 58 190 58
vhangup 153 111 153
vm86 - 166 -
vm86old - 113 -
vmsplice 278 316 532
vserver 236 273 -
wait4 61 114 61
waitid 247 284 529
waitpid - 7 -
write 1 4 1
writev 20 146 516
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_and_complete() {
        let t = table();
        assert!(t.len() > 450);
        assert!(
            t.windows(2).all(|w| w[0].0 < w[1].0),
            "sorted, no duplicates"
        );
        assert!(t
            .iter()
            .all(|(_, n)| n.x86_64.is_some() || n.i386.is_some()));
    }

    #[test]
    fn known_numbers() {
        let n = |s| lookup(s).unwrap();
        assert_eq!(
            n("read"),
            Numbers {
                x86_64: Some(0),
                i386: Some(3),
                x32: Some(0)
            }
        );
        assert_eq!(n("execve").x32, Some(520));
        assert_eq!(n("mkdir").x86_64, Some(libc::SYS_mkdir as u32));
        assert_eq!(n("unshare").x86_64, Some(libc::SYS_unshare as u32));
        assert_eq!(n("clone3").x86_64, Some(435));
        assert_eq!(
            n("mmap2"),
            Numbers {
                x86_64: None,
                i386: Some(192),
                x32: None
            }
        );
        assert_eq!(n("map_shadow_stack").i386, None);
        assert_eq!(n("removexattrat").i386, Some(466));
        assert_eq!(lookup("no_such_call"), None);
    }
}
