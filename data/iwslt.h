#pragma once
// Readers of the IWSLT TED releases as distributed (IWSLT14 de-en, IWSLT17
// fr-en; scripts/fetch_iwslt.sh downloads them):
//
//   train.tags.<pair>.<lang>   one sentence per line; every talk starts with
//       metadata lines (<url> <keywords> <speaker> <talkid> <title>
//       <description> <reviewer> <translator> ...), optionally wrapped in
//       <doc docid="..."> ... </doc>. Each talk is a document, its id the
//       docid or else the <talkid>. Metadata lines are not sentences.
//   IWSLT1x.TED.<set>.<pair>.<lang>.xml   <mteval>/<srcset|refset> with
//       <doc docid="..."> holding metadata lines and <seg id="N"> text </seg>
//       lines; segment ids restart in every document; text is stripped and the
//       XML entities (&amp; &lt; &gt; &quot; &apos; &#N; &#xN;) decoded.
//
// Source and target are parsed separately and aligned by document (same ids
// in the same order) and segment (same count; same ids for XML). Any mismatch
// throws InputError naming both files, the document and the segment; so do
// invalid UTF-8, unclosed or stray tags and empty documents.
#include <string>

#include "data/corpus.h"

namespace mambamt::data {

// Reads a train.tags pair.
Corpus read_iwslt_train(const std::string& src_path, const std::string& tgt_path);

// Reads an XML dev/test pair.
Corpus read_iwslt_xml(const std::string& src_path, const std::string& tgt_path);

// Resolves `path` to a file pair and reads it:
//   a directory         -> DIR/train.tags.<src>-<tgt>.<lang> (or <tgt>-<src>)
//   PREFIX.<src>.xml    -> that file and PREFIX.<tgt>.xml
//   PREFIX (xml exists) -> PREFIX.<src>.xml and PREFIX.<tgt>.xml
//   PREFIX              -> PREFIX.<src> and PREFIX.<tgt> (train.tags.<pair>)
Corpus read_iwslt(const std::string& path, const std::string& src_lang, const std::string& tgt_lang);

}  // namespace mambamt::data
