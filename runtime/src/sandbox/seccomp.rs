//! The syscall filter the in-sandbox helper installs before it `exec`s
//! bash (seccompiler builds the BPF; applying it is a safe call).
//!
//! It refuses what no agent command needs and what would reach past the
//! other walls: device nodes, tracing other processes or reading their
//! memory, new namespaces and mounts, BPF, perf, the kernel keyring,
//! io_uring (which bypasses the filter), module and kexec loading, the
//! tty's input queue. Read-only commands (Plan, `never`) also get no
//! sockets of the unix or IP families and no SysV IPC. `clone3` answers
//! ENOSYS so libc falls back to `clone`, whose flags the filter can read
//! (with EPERM, spawning fails outright).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Bit of the x32 ABI's syscall numbers on x86-64: the same calls again
/// under other numbers, refused alike.
const X32: i64 = 0x4000_0000;

/// Syscalls refused whatever their arguments.
const ALWAYS: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    libc::SYS_quotactl,
];

/// SysV IPC: shared with every process of the IPC namespace, so refused
/// to read-only commands.
const SYSV_IPC: &[i64] = &[
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmctl,
    libc::SYS_shmdt,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semctl,
    libc::SYS_semtimedop,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
];

/// Flags of `clone` that make a namespace.
const NEW_NAMESPACES: &[u64] = &[
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
];

/// The filters for one command, in the order to install them: the EPERM
/// filter, then the one that gives `clone3` ENOSYS (one action per
/// filter; the kernel applies the strictest answer of all).
pub(crate) fn filters(read_only: bool) -> Result<Vec<BpfProgram>, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("no seccomp filter for this architecture: {e}"))?;
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &call in ALWAYS {
        refused.insert(call, Vec::new());
    }
    if read_only {
        for &call in SYSV_IPC {
            refused.insert(call, Vec::new());
        }
        let families = [libc::AF_UNIX, libc::AF_INET, libc::AF_INET6];
        let rules = families
            .iter()
            .map(|&family| rule(0, SeccompCmpOp::Eq, family as u64))
            .collect::<Result<_, _>>()?;
        refused.insert(libc::SYS_socket, rules);
    }
    // Device nodes: the file type is in `mode`, argument 1 of mknod and 2
    // of mknodat.
    for (call, arg) in [(libc::SYS_mknod, 1), (libc::SYS_mknodat, 2)] {
        let rules = [libc::S_IFCHR, libc::S_IFBLK]
            .iter()
            .map(|&kind| {
                rule(
                    arg,
                    SeccompCmpOp::MaskedEq(u64::from(libc::S_IFMT)),
                    u64::from(kind),
                )
            })
            .collect::<Result<_, _>>()?;
        refused.insert(call, rules);
    }
    let rules = NEW_NAMESPACES
        .iter()
        .map(|&flag| rule(0, SeccompCmpOp::MaskedEq(flag), flag))
        .collect::<Result<_, _>>()?;
    refused.insert(libc::SYS_clone, rules);
    // Pushing bytes into the terminal's input queue types commands for
    // whoever reads it next.
    let rules = [libc::TIOCSTI, libc::TIOCLINUX]
        .iter()
        .map(|&request| rule(1, SeccompCmpOp::Eq, request))
        .collect::<Result<_, _>>()?;
    refused.insert(libc::SYS_ioctl, rules);
    if arch == TargetArch::x86_64 {
        let x32: Vec<(i64, Vec<SeccompRule>)> = refused
            .iter()
            .map(|(call, rules)| (call | X32, rules.clone()))
            .collect();
        refused.extend(x32);
    }
    let mut clone3 = BTreeMap::new();
    clone3.insert(libc::SYS_clone3, Vec::new());
    let errno = |e: i32| SeccompAction::Errno(e.unsigned_abs());
    [(refused, libc::EPERM), (clone3, libc::ENOSYS)]
        .into_iter()
        .map(|(rules, e)| {
            SeccompFilter::new(rules, SeccompAction::Allow, errno(e), arch)
                .and_then(BpfProgram::try_from)
                .map_err(|e| format!("cannot build the seccomp filter: {e}"))
        })
        .collect()
}

/// Installs `filters` on the calling thread (and what it `exec`s).
pub(crate) fn install(filters: &[BpfProgram]) -> Result<(), String> {
    for filter in filters {
        seccompiler::apply_filter(filter)
            .map_err(|e| format!("cannot install the seccomp filter: {e}"))?;
    }
    Ok(())
}

fn rule(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompRule, String> {
    let len = match op {
        // Flags, modes and families fit in the low 32 bits; ioctl's request
        // is an unsigned long but its numbers do too.
        SeccompCmpOp::MaskedEq(_) | SeccompCmpOp::Eq => SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ge
        | SeccompCmpOp::Gt
        | SeccompCmpOp::Le
        | SeccompCmpOp::Lt
        | SeccompCmpOp::Ne => SeccompCmpArgLen::Qword,
    };
    SeccompCondition::new(arg, len, op, value)
        .and_then(|c| SeccompRule::new(vec![c]))
        .map_err(|e| format!("cannot build the seccomp filter: {e}"))
}
