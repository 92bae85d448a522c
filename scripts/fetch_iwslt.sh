#!/usr/bin/env bash
# Downloads and unpacks the official IWSLT TED releases (WIT3) that mambamt's
# `iwslt` corpus reader reads as distributed:
#
#   DEST/iwslt14/de-en/train.tags.de-en.{de,en}
#   DEST/iwslt14/de-en/IWSLT14.TED.{dev2010,tst2010,tst2011,tst2012,...}.de-en.{de,en}.xml
#   DEST/iwslt17/fr-en/train.tags.fr-en.{fr,en}
#   DEST/iwslt17/fr-en/IWSLT17.TED.{dev2010,tst2010,...,tst2015}.fr-en.{fr,en}.xml
#
# In an experiment: [data] corpus = "iwslt", src_lang = "de", tgt_lang = "en",
# train = "DEST/iwslt14/de-en", valid = "DEST/iwslt14/de-en/IWSLT14.TED.dev2010.de-en",
# test = ["DEST/iwslt14/de-en/IWSLT14.TED.tst2014.de-en"] (a prefix or the .de.xml file).
#
# Usage: scripts/fetch_iwslt.sh [DEST] [iwslt14|iwslt17|all]   (defaults: data-raw/iwslt all)
# Needs internet and curl or wget; the tests never run it. Each archive is
# tried from the official WIT3 address first, then from a mirror.
set -euo pipefail

DEST=${1:-data-raw/iwslt}
WHICH=${2:-all}

IWSLT14_URLS=(
  "https://wit3.fbk.eu/archive/2014-01/texts/de/en/de-en.tgz"
  "http://dl.fbaipublicfiles.com/fairseq/data/iwslt14/de-en.tgz"
)
IWSLT17_URLS=(
  "https://wit3.fbk.eu/archive/2017-01-trnted/texts/fr/en/fr-en.tgz"
  "https://huggingface.co/datasets/IWSLT/iwslt2017/resolve/main/data/2017-01-trnted/texts/fr/en/fr-en.zip"
)

die() { echo "fetch_iwslt: $*" >&2; exit 1; }

# Download folders, removed however the script ends.
TMP_DIRS=()
cleanup() { if [ ${#TMP_DIRS[@]} -gt 0 ]; then rm -rf "${TMP_DIRS[@]}"; fi; }
trap cleanup EXIT

download() {  # download URL FILE
  if command -v curl >/dev/null; then
    curl --fail --location --silent --show-error --retry 3 -o "$2" "$1"
  elif command -v wget >/dev/null; then
    wget --quiet --tries=3 -O "$2" "$1"
  else
    die "neither curl nor wget is installed"
  fi
}

unpack() {  # unpack ARCHIVE DIR
  case "$1" in
    *.tgz | *.tar.gz) tar -xzf "$1" -C "$2" ;;
    *.zip) command -v unzip >/dev/null || die "unzip is needed for $1"; unzip -q -o "$1" -d "$2" ;;
    *) die "unknown archive type: $1" ;;
  esac
}

# fetch NAME PAIR SRC TGT URL...: unpacks into DEST/NAME/PAIR and checks the files.
fetch() {
  local name=$1 pair=$2 src=$3 tgt=$4
  shift 4
  local out="$DEST/$name"
  local train="$out/$pair/train.tags.$pair"
  if [ -f "$train.$src" ] && [ -f "$train.$tgt" ]; then
    echo "fetch_iwslt: $name $pair already in $out/$pair"
    return 0
  fi
  mkdir -p "$out"
  local tmp
  tmp=$(mktemp -d "$out/.download.XXXXXX")
  TMP_DIRS+=("$tmp")
  local url archive ok=0
  for url in "$@"; do
    archive="$tmp/${url##*/}"
    echo "fetch_iwslt: $name: downloading $url"
    if download "$url" "$archive"; then
      ok=1
      break
    fi
    echo "fetch_iwslt: $name: $url failed, trying the next address" >&2
  done
  [ "$ok" = 1 ] || die "$name: every address failed"
  unpack "$archive" "$tmp"
  # The archives hold PAIR/ at their top (some mirrors nest it one level deeper).
  local found
  found=$(find "$tmp" -type f -name "train.tags.$pair.$src" | head -n 1)
  [ -n "$found" ] || die "$name: no train.tags.$pair.$src in $archive"
  rm -rf "${out:?}/$pair"
  mv "$(dirname "$found")" "$out/$pair"
  # Some releases ship the XML sets as a nested archive.
  for nested in "$out/$pair"/*.tgz; do
    [ -f "$nested" ] && tar -xzf "$nested" -C "$out/$pair"
  done
  [ -f "$train.$tgt" ] || die "$name: $train.$tgt missing after unpacking"
  local n_xml
  n_xml=$(find "$out/$pair" -maxdepth 1 -name "*.$pair.$src.xml" | wc -l)
  echo "fetch_iwslt: $name $pair: $(grep -vc '^<' "$train.$src") training lines, $n_xml dev/test sets in $out/$pair"
}

case "$WHICH" in
  iwslt14) fetch iwslt14 de-en de en "${IWSLT14_URLS[@]}" ;;
  iwslt17) fetch iwslt17 fr-en fr en "${IWSLT17_URLS[@]}" ;;
  all)
    fetch iwslt14 de-en de en "${IWSLT14_URLS[@]}"
    fetch iwslt17 fr-en fr en "${IWSLT17_URLS[@]}"
    ;;
  *) die "unknown set '$WHICH' (iwslt14, iwslt17 or all)" ;;
esac
