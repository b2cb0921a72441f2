#!/usr/bin/env bash
# Make sure Debian's Chromium is installed for the browser tests (Playwright drives it through
# executable_path; Playwright's own browser download cannot work on these machines).
# Idempotent: nothing is installed when /usr/bin/chromium exists.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
    echo "ensure-browser: $(chromium --version 2>/dev/null || echo chromium) is installed"
    exit 0
fi
echo "ensure-browser: installing Debian's chromium"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q chromium >/dev/null
chromium --version
