#!/usr/bin/env bash
# Export Liger-Kernel's src/ (a public library, never committed here) into .liger/src for
# benchmarks/gpu/liger_rmsnorm.py. Give it a clone or git directory of linkedin/Liger-Kernel:
#   bash benchmarks/gpu/fetch_liger.sh /path/to/Liger-Kernel[.git]   (default: clone from GitHub)
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.liger/' .git/info/exclude 2>/dev/null || echo /.liger/ >> .git/info/exclude
src="${1:-}"
if [ -z "$src" ]; then
    src=$(mktemp -d)/Liger-Kernel
    git clone -q --depth 1 https://github.com/linkedin/Liger-Kernel "$src"
fi
rm -rf .liger && mkdir -p .liger
git -C "$src" archive HEAD src/liger_kernel | tar -x -C .liger
git -C "$src" log -1 --format='%H %cd' > .liger/COMMIT
echo "Liger-Kernel $(cat .liger/COMMIT) in .liger/src"
