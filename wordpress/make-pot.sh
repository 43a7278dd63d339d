#!/bin/sh
# Regenerates visitor-service/languages/visitor-service.pot from the plugin's PHP with GNU
# xgettext (Debian's gettext; wp-cli's `wp i18n make-pot` is not packaged here). Run it after
# changing a translatable string; tests/wordpress/test_review_rules.py checks the file is current.
set -eu
cd "$(dirname "$0")/visitor-service"
mkdir -p languages
# WordPress's tools (Plugin Check, make-pot) read a translators comment on the line above the
# line that opens the gettext call; GNU xgettext only on the line above the string. In a scratch
# copy, a comment standing above a line that ends in `_n(` (or `__(`, ...) swaps places with
# that line: xgettext then sees it above the string, and every line number stays as it is.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
find . -name '*.php' | LC_ALL=C sort > "$scratch/files"
while read -r file; do
    mkdir -p "$scratch/$(dirname "$file")"
    perl -0pe 's{^([ \t]*/\*[ \t]*translators:[^\n]*\*/)[ \t]*\n([^\n]*\b(?:__|_e|_n|_x|_ex|_nx|esc_html__|esc_html_e|esc_attr__|esc_attr_e|esc_html_x|esc_attr_x)\([ \t]*)$}{$2\n$1}mg' \
        "$file" > "$scratch/$file"
done < "$scratch/files"
(cd "$scratch" && xgettext --files-from=files --language=PHP --from-code=UTF-8 \
    --add-comments=translators: --sort-by-file --no-wrap \
    --keyword=__ --keyword=_e --keyword=_n:1,2 --keyword=_x:1,2c --keyword=_ex:1,2c \
    --keyword=_nx:1,2,4c --keyword=esc_html__ --keyword=esc_html_e --keyword=esc_attr__ \
    --keyword=esc_attr_e --keyword=esc_html_x:1,2c --keyword=esc_attr_x:1,2c \
    --package-name="Visitor Service" \
    --package-version="$(sed -n "s/^ \* Version: *//p" visitor-service.php)" \
    --copyright-holder="Visitor Service" \
    --msgid-bugs-address="https://service.example/support" \
    --output=pot)
mv "$scratch/pot" languages/visitor-service.pot
# The header's placeholders, as WordPress's own templates have them.
sed -i 's/^"Content-Type: text\/plain; charset=CHARSET\\n"$/"Content-Type: text\/plain; charset=UTF-8\\n"/' \
    languages/visitor-service.pot
