#!/usr/bin/env bash
# Make sure Debian's Chromium is installed for the browser tests (Playwright drives it through
# executable_path; Playwright's own browser download cannot work on these machines).
# Idempotent: nothing is installed when /usr/bin/chromium exists.
set -euo pipefail

# axe-core (package.json, pinned in package-lock.json) for the browser tests' accessibility
# audit: test-only, injected into the pages under test, never served by the app.
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ ! -f "$root/node_modules/axe-core/axe.min.js" ] && command -v npm >/dev/null 2>&1; then
    (cd "$root" && npm ci --no-audit --no-fund >/dev/null) \
        || echo "ensure-browser: npm could not install axe-core; the accessibility audit will skip"
fi

if command -v chromium >/dev/null 2>&1; then
    echo "ensure-browser: $(chromium --version 2>/dev/null || echo chromium) is installed"
    exit 0
fi
echo "ensure-browser: installing Debian's chromium"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q chromium >/dev/null
chromium --version
