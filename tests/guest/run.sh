# Runs the guest script $1 (a file in /tests) the way /init runs opscript= (scripts/initramfs.sh):
# its exit status and the end marker for the host, then power off. For a script typed at the
# board shell (tests/image.sh: `sh /tests/run.sh install.sh`).
sh "/tests/$1"
echo "== script exit status $?"
echo "== guest done"
reboot -f
