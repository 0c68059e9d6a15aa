#!/bin/sh
# The vm tier's systemd boot: run by stornet-vm-check.service once the guest's systemd has
# reached multi-user.target. Installs the packages with dpkg, runs stornet-agent as the
# service they install, reports one `STORNET result ok|FAILED <check>` line per check on the
# console, then powers the guest off.

URL=http://127.0.0.1:9477
DEBS=/root/debs

echo "STORNET boot $(uname -r) up $(cut -d' ' -f1 /proc/uptime) s"
echo "STORNET lockdown $(cat /sys/kernel/security/lockdown 2>/dev/null)"

# Runs check function $1; its output is shown only when it fails.
check() {
	start=$(date +%s)
	if out=$("$1" 2>&1); then
		echo "STORNET result ok $1"
	else
		echo "---- $1 stdout ----"
		echo "$out"
		echo "STORNET result FAILED $1"
	fi
	echo "STORNET took $1 $(($(date +%s) - start)) s"
}

agent_pid() { systemctl show -p MainPID --value stornet-agent; }

# Links of BTF tracepoints (raw_tracepoint links, or tracing links on newer kernels): the
# agent's probes. systemd's own are cgroup links.
tracing_links() { bpftool link show | grep -c -E '^[0-9]+: (raw_tracepoint|tracing) ' || true; }

install_without_btf_says_so() {
	# Hide the kernel's BTF for the length of the install.
	mount -t tmpfs nobtf /sys/kernel/btf || return 1
	msg=$(dpkg -i $DEBS/stornet-agent_*.deb 2>&1)
	rc=$?
	umount /sys/kernel/btf
	echo "$msg"
	[ $rc = 0 ] || return 1
	echo "$msg" | grep -q 'this kernel has no BTF' || { echo "the install did not say so"; return 1; }
	! systemctl -q is-active stornet-agent || { echo "started"; return 1; }
	dpkg -P stornet-agent > /dev/null
}

install_enables_nothing() {
	dpkg -i $DEBS/stornet-agent_*.deb || return 1
	test -f /etc/stornet/agent.toml || { echo "no /etc/stornet/agent.toml"; return 1; }
	docs_installed stornet-agent "stornet-agent-check stornet-agent-snapshot" || return 1
	state=$(systemctl is-enabled stornet-agent)
	[ "$state" = disabled ] || { echo "is-enabled: $state"; return 1; }
	! systemctl -q is-active stornet-agent || { echo "started by the install"; return 1; }
}

start_reports_ready() {
	# Type=notify: start returns once the agent has sent READY=1.
	systemctl start stornet-agent || { journalctl -u stornet-agent --no-pager | tail -20; return 1; }
	systemctl -q is-active stornet-agent || return 1
	# Ready means listening: the first request right after start is answered.
	curl -sf "$URL/-/healthy" > /dev/null || { echo "no answer right after READY=1"; return 1; }
}

probes_attached_in_sandbox() {
	pid=$(agent_pid)
	curl -sf "$URL/metrics" > /tmp/metrics || { echo "scrape failed"; return 1; }
	up=$(grep -c '^stornet_probe_up{.*} 1$' /tmp/metrics)
	all=$(grep -c '^stornet_probe_up{' /tmp/metrics)
	grep '^stornet_probe_up{' /tmp/metrics
	[ "$all" -ge 8 ] && [ "$up" = "$all" ] || { echo "$up of $all probes up"; return 1; }
	# The sandbox is real: own mount namespace, no new privileges, only the unit's capabilities.
	[ "$(readlink /proc/$pid/ns/mnt)" != "$(readlink /proc/1/ns/mnt)" ] || { echo "no mount namespace of its own"; return 1; }
	grep -q '^NoNewPrivs:[[:space:]]*1' /proc/$pid/status || { echo "NoNewPrivs not set"; return 1; }
	bnd=$(awk '/^CapBnd/ {print $2}' /proc/$pid/status)
	# CAP_SYS_ADMIN (21), CAP_PERFMON (38), CAP_BPF (39).
	[ "$bnd" = 000000c000200000 ] || { echo "CapBnd $bnd"; return 1; }
	# The probes that attach on demand are up but detached until a device needs them.
	attached=$(grep -c '^stornet_probe_attached{.*} 1$' /tmp/metrics)
	[ "$attached" -ge 1 ] || { echo "no probe attached"; return 1; }
	links=$(tracing_links)
	[ "$links" -ge "$attached" ] || { echo "$links tracing links for $attached attached probes"; bpftool link show; return 1; }
}

journal_is_logfmt() {
	journalctl _SYSTEMD_UNIT=stornet-agent.service -o cat --no-pager > /tmp/journal
	grep -q 'msg="probe attached"' /tmp/journal || { cat /tmp/journal; return 1; }
	bad=$(grep -v -E '^(ts=[^ ]+ )?level=(debug|info|warn|error) msg=' /tmp/journal)
	[ -z "$bad" ] || { echo "not logfmt: $bad"; return 1; }
}

exposure_at_most_2() {
	systemd-analyze security --no-pager stornet-agent.service > /tmp/security 2>&1
	level=$(sed -n 's/.*Overall exposure level for stornet-agent.service: \([0-9.]*\).*/\1/p' /tmp/security)
	echo "exposure $level"
	[ -n "$level" ] && awk -v l="$level" 'BEGIN { exit !(l <= 2.0) }' || { cat /tmp/security; return 1; }
	systemctl -q is-active stornet-agent || { echo "the agent is no longer running"; return 1; }
}

watchdog_restarts_a_stopped_agent() {
	# A shorter watchdog than the unit's 30 s (and a quicker restart), so the check takes
	# seconds; the mechanism is the unit's: WATCHDOG=1 pings from the agent, a kill and a
	# restart by systemd.
	mkdir -p /etc/systemd/system/stornet-agent.service.d
	printf '[Service]\nWatchdogSec=6s\nRestartSec=1s\n' > /etc/systemd/system/stornet-agent.service.d/watchdog.conf
	systemctl daemon-reload && systemctl restart stornet-agent || return 1
	old=$(agent_pid)
	kill -STOP "$old"
	i=0
	while [ $i -lt 60 ]; do
		sleep 1
		i=$((i + 1))
		new=$(agent_pid)
		if [ "$new" != "$old" ] && [ "$new" != 0 ] && systemctl -q is-active stornet-agent; then
			break
		fi
	done
	rm -r /etc/systemd/system/stornet-agent.service.d
	systemctl daemon-reload
	echo "pid $old -> $new after $i s, restarts $(systemctl show -p NRestarts --value stornet-agent)"
	[ "$new" != "$old" ] && [ "$new" != 0 ] || return 1
	journalctl -u stornet-agent --no-pager | grep -q -i 'watchdog timeout' || { echo "no watchdog timeout in the journal"; return 1; }
	# Probes attached again after the restart.
	curl -sf "$URL/metrics" | grep -q '^stornet_probe_up{.*} 1$'
}

stop_detaches_everything() {
	[ "$(tracing_links)" -gt 0 ] || { echo "no tracing links before the stop"; return 1; }
	[ "$(bpftool prog show | grep -c 'name stornet_')" -gt 0 ] || { echo "no stornet programs before the stop"; return 1; }
	systemctl stop stornet-agent || return 1
	links=$(tracing_links)
	[ "$links" = 0 ] || { echo "$links tracing links left"; bpftool link show; return 1; }
	left=$(bpftool prog show | grep -c 'name stornet_' || true)
	[ "$left" = 0 ] || { bpftool prog show; return 1; }
}

remove_keeps_conffiles() {
	dpkg -r stornet-agent || return 1
	for f in /usr/bin/stornet-agent /usr/lib/systemd/system/stornet-agent.service; do
		[ ! -e $f ] || { echo "$f left"; return 1; }
	done
	test -f /etc/stornet/agent.toml && test -f /etc/default/stornet-agent || { echo "conffiles removed"; return 1; }
	dpkg -s stornet-agent | grep -q '^Status: deinstall ok config-files' || { dpkg -s stornet-agent; return 1; }
}

purge_leaves_nothing() {
	dpkg -P stornet-agent || return 1
	! dpkg -s stornet-agent > /dev/null 2>&1 || { echo "still known to dpkg"; return 1; }
	left=$(find /etc /usr /var /run -name '*stornet*' ! -name '*stornet-vm-check*' 2> /dev/null)
	[ -z "$left" ] || { echo "left behind: $left"; return 1; }
}

# The man pages and shell completions of program $1 are where man, bash, zsh and fish look;
# each page named after a subcommand in $2 is there, and bash completes the program.
docs_installed() {
	for page in "$1" $2; do
		test -f /usr/share/man/man1/$page.1.gz || { echo "no man page $page.1.gz"; ls /usr/share/man/man1; return 1; }
	done
	test -f /usr/share/zsh/vendor-completions/_$1 || { echo "no zsh completion"; return 1; }
	test -f /usr/share/fish/vendor_completions.d/$1.fish || { echo "no fish completion"; return 1; }
	bash -c "source /usr/share/bash-completion/completions/$1 && complete -p $1" || return 1
}

# Prints the long options `--NAME` at the start of the lines of a help text on stdin.
help_options() { sed -n 's/^ *--\([A-Za-z0-9_.-]*\).*/\1/p'; }

stornet_package() {
	dpkg -i $DEBS/stornet_*.deb || return 1
	stornet --version || return 1
	stornet analyze --help | grep -q -- --prometheus || return 1
	docs_installed stornet "stornet-analyze stornet-watch stornet-report" || return 1
	dpkg -P stornet || return 1
	[ ! -e /usr/bin/stornet ] || { echo "/usr/bin/stornet left"; return 1; }
}

loadgen_package() {
	dpkg -i $DEBS/loadgen_*.deb || return 1
	loadgen --version || return 1
	docs_installed loadgen "loadgen-run loadgen-serve loadgen-analyze" || return 1
	# loadgen-run.1 names every option `loadgen run --help` lists (roff writes a dash as \-).
	loadgen run --help | help_options | sort -u > /tmp/help-options
	zcat /usr/share/man/man1/loadgen-run.1.gz | sed 's/\\-/-/g' | grep -o -e '--[A-Za-z0-9_.-]*' |
		sed 's/^--//' | sort -u > /tmp/page-options
	n=$(wc -l < /tmp/help-options)
	[ "$n" -gt 50 ] || { echo "only $n options in loadgen run --help"; return 1; }
	missing=$(comm -23 /tmp/help-options /tmp/page-options)
	[ -z "$missing" ] || { echo "loadgen-run.1 lacks:" $missing; return 1; }
	# bash completes run's options from the same table.
	got=$(bash -c 'source /usr/share/bash-completion/completions/loadgen
		COMP_WORDS=(loadgen run --rwm); COMP_CWORD=2; _loadgen loadgen --rwm run; echo "${COMPREPLY[*]}"')
	[ "$got" = "--rwmixread --rwmixwrite" ] || { echo "bash completes loadgen run --rwm as: $got"; return 1; }
	dpkg -P loadgen || return 1
	[ ! -e /usr/bin/loadgen ] || { echo "/usr/bin/loadgen left"; return 1; }
}

for c in install_without_btf_says_so install_enables_nothing start_reports_ready probes_attached_in_sandbox journal_is_logfmt \
	exposure_at_most_2 watchdog_restarts_a_stopped_agent stop_detaches_everything \
	remove_keeps_conffiles purge_leaves_nothing stornet_package loadgen_package; do
	check $c
done
echo "STORNET done"
systemctl poweroff --force
