#!/usr/bin/env bash
# Install everything into .venv at the repository root.
#   bash scripts/install.sh            # runtime + demo (Streamlit)
#   bash scripts/install.sh --test     # also the browser-test packages (chromium, chromium-driver)
# System packages (Debian/Ubuntu): poppler-utils (pdftoppm), tesseract-ocr with English, Simplified Chinese,
# Japanese and Korean (OCR of scanned pages, each read in its script's pack; add tesseract-ocr-LANG for others).
# A CUDA machine: install your CUDA torch into .venv first; torch==2.13.0 from PyPI is a CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE="${1:-}"
case "$MODE" in
  ""|--test) ;;
  -h|--help|help) sed -n '2,7p' "$0"; exit 0 ;;
  *) echo "[install] unknown option '$MODE' (known: --test)" >&2; exit 2 ;;
esac
APT_PACKAGES=(poppler-utils tesseract-ocr tesseract-ocr-eng tesseract-ocr-chi-sim tesseract-ocr-jpn
              tesseract-ocr-kor)
if [[ "$MODE" == "--test" ]]; then
  APT_PACKAGES+=(chromium chromium-driver)
fi
STEPS=4
step() { echo "[install] $1/$STEPS $2"; }

step 1 "system packages (${APT_PACKAGES[*]})"

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "[install]     missing: ${missing[*]}: installing them with apt-get (a minute or two)"
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""
    if [[ $(id -u) -ne 0 ]]; then
      if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "[install] not root and no sudo: run 'apt-get install -y ${missing[*]}' as root" >&2; exit 1
      fi
    fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "[install] no apt-get: install ${missing[*]} with your package manager" >&2; exit 1
  fi
else
  echo "[install]     all present"
fi

PYTHON="${PYTHON:-python3}"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
  || { echo "[install] Python >= 3.10 is required ($PYTHON is $("$PYTHON" --version 2>&1))" >&2; exit 1; }
step 2 "virtual environment .venv"
if [[ -x .venv/bin/python ]]; then echo "[install]     .venv exists: updating it"; else "$PYTHON" -m venv .venv; fi
# requirements_demo.txt (+ requirements.txt) pins every extra of pyproject.toml the demo and the tests use
# ([samples]: reportlab for the sample corpus, [llama-index], [demo], [test], [train], [mcp]), so the
# package itself goes in with --no-deps.
# pip prints one line per package, and a progress bar per download on a terminal (no -q: a silent
# minute looks hung; no bar in a log file, where it would be thousands of lines).
PROGRESS=off; [[ -t 1 ]] && PROGRESS=on
step 3 "python packages from requirements_demo.txt (a few minutes on a fresh machine: torch, transformers, ...)"
.venv/bin/python -m pip install --disable-pip-version-check --progress-bar "$PROGRESS" -r requirements_demo.txt
step 4 "this project, editable (search_engine, vrag_rl, vimrag, demo)"
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -e .
# Lazy torchvision fix for CPU-only torch in every process of this venv (Streamlit, uvicorn, Ray
# workers): see search_engine/infra/torchvision_shim.py. It does nothing on a CUDA torch.
SITE=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo 'import search_engine.infra.torchvision_shim as _c; _c.install_torchvision_hook()' > "$SITE/vrag_torchvision_shim.pth"
echo "[install] done: $(.venv/bin/python -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)')"
if [[ "$MODE" == "--test" ]]; then
  echo "[install] next: bash scripts/run_tests.sh    (or source .venv/bin/activate, then the commands of README.md)"
else
  echo "[install] next: ./run_demo.sh    (or source .venv/bin/activate, then the commands of README.md)"
fi
