#include "image_check.h"

#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

namespace mambamt::results::testing {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::uint32_t be32(const unsigned char* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3];
}

using UncompressFn = int (*)(unsigned char*, unsigned long*, const unsigned char*, unsigned long);

UncompressFn load_uncompress() {
  static UncompressFn fn = [] {
    void* lib = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libz.so", RTLD_NOW | RTLD_LOCAL);
    return lib ? reinterpret_cast<UncompressFn>(dlsym(lib, "uncompress")) : nullptr;
  }();
  return fn;
}

int paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

}  // namespace

std::string xml_problem(const std::string& xml) {
  std::vector<std::string> stack;
  std::size_t i = 0;
  auto name_at = [&](std::size_t p) {
    std::size_t e = p;
    while (e < xml.size() && (std::isalnum(static_cast<unsigned char>(xml[e])) || xml[e] == '-' ||
                              xml[e] == ':' || xml[e] == '_')) {
      ++e;
    }
    return xml.substr(p, e - p);
  };
  auto check_entities = [&](std::size_t from, std::size_t to) -> std::string {
    for (std::size_t k = from; k < to; ++k) {
      if (xml[k] == '<') return "raw '<' in text at " + std::to_string(k);
      if (xml[k] != '&') continue;
      std::size_t semi = xml.find(';', k);
      if (semi == std::string::npos || semi > to) return "unterminated entity at " + std::to_string(k);
      std::string ent = xml.substr(k + 1, semi - k - 1);
      bool ok = ent == "amp" || ent == "lt" || ent == "gt" || ent == "quot" || ent == "apos" ||
                (ent.size() > 1 && ent[0] == '#');
      if (!ok) return "unknown entity &" + ent + "; at " + std::to_string(k);
    }
    return "";
  };
  while (i < xml.size()) {
    std::size_t lt = xml.find('<', i);
    if (lt == std::string::npos) {
      std::string p = check_entities(i, xml.size());
      if (!p.empty()) return p;
      break;
    }
    std::string p = check_entities(i, lt);
    if (!p.empty()) return p;
    if (xml.compare(lt, 4, "<!--") == 0) {
      std::size_t end = xml.find("-->", lt);
      if (end == std::string::npos) return "unterminated comment";
      i = end + 3;
      continue;
    }
    if (xml.compare(lt, 2, "<?") == 0) {
      std::size_t end = xml.find("?>", lt);
      if (end == std::string::npos) return "unterminated declaration";
      i = end + 2;
      continue;
    }
    // Find the end of the tag, skipping quoted attribute values.
    std::size_t k = lt + 1;
    char quote = 0;
    for (; k < xml.size(); ++k) {
      if (quote) {
        if (xml[k] == quote) quote = 0;
        else if (xml[k] == '<') return "raw '<' in an attribute at " + std::to_string(k);
      } else if (xml[k] == '"' || xml[k] == '\'') {
        quote = xml[k];
      } else if (xml[k] == '>') {
        break;
      }
    }
    if (k >= xml.size()) return "unterminated tag at " + std::to_string(lt);
    const std::string tag = xml.substr(lt, k - lt + 1);
    std::string ep = check_entities(lt + 1, k);  // entities inside attribute values
    if (!ep.empty() && ep.rfind("raw", 0) != 0) return ep;
    if (tag[1] == '/') {
      const std::string name = name_at(lt + 2);
      if (stack.empty() || stack.back() != name) {
        return "closing </" + name + "> does not match <" + (stack.empty() ? "" : stack.back()) + ">";
      }
      stack.pop_back();
    } else {
      const std::string name = name_at(lt + 1);
      if (name.empty()) return "tag without a name at " + std::to_string(lt);
      // Attributes: name="value" pairs.
      std::size_t a = lt + 1 + name.size();
      while (a < k) {
        while (a < k && std::isspace(static_cast<unsigned char>(xml[a]))) ++a;
        if (a >= k || xml[a] == '/') break;
        const std::string attr = name_at(a);
        if (attr.empty()) return "bad attribute in " + tag.substr(0, 60);
        a += attr.size();
        if (a >= k || xml[a] != '=') return "attribute " + attr + " without a value";
        ++a;
        if (a >= k || (xml[a] != '"' && xml[a] != '\'')) return "unquoted attribute " + attr;
        const std::size_t close = xml.find(xml[a], a + 1);
        if (close == std::string::npos || close > k) return "unterminated attribute " + attr;
        a = close + 1;
      }
      if (tag[tag.size() - 2] != '/') stack.push_back(name);
    }
    i = k + 1;
  }
  if (!stack.empty()) return "unclosed <" + stack.back() + ">";
  return "";
}

std::size_t count_of(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t p = haystack.find(needle); p != std::string::npos; p = haystack.find(needle, p + needle.size())) ++n;
  return n;
}

bool have_rsvg_convert() {
  return std::system("command -v rsvg-convert >/dev/null 2>&1") == 0;
}

int render_png(const std::string& svg_path, const std::string& png_path) {
  const std::string cmd = "rsvg-convert -o '" + png_path + "' '" + svg_path + "' 2>/dev/null";
  return std::system(cmd.c_str());
}

PngHeader read_png_header(const std::string& path) {
  PngHeader h;
  const std::string data = read_file(path);
  static const unsigned char kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (data.size() < 33 || std::memcmp(data.data(), kSig, 8) != 0) return h;
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  if (std::memcmp(p + 12, "IHDR", 4) != 0) return h;
  h.width = be32(p + 16);
  h.height = be32(p + 20);
  h.bit_depth = p[24];
  h.color_type = p[25];
  h.valid = true;
  return h;
}

std::optional<Image> decode_png(const std::string& path) {
  UncompressFn uncompress = load_uncompress();
  if (!uncompress) return std::nullopt;
  const std::string data = read_file(path);
  const PngHeader h = read_png_header(path);
  if (!h.valid || h.bit_depth != 8 || (h.color_type != 6 && h.color_type != 2)) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  if (p[28] != 0) return std::nullopt;  // interlaced
  std::string idat;
  for (std::size_t pos = 8; pos + 8 <= data.size();) {
    const std::uint32_t len = be32(p + pos);
    if (pos + 12 + len > data.size()) return std::nullopt;
    if (std::memcmp(p + pos + 4, "IDAT", 4) == 0) idat.append(data, pos + 8, len);
    pos += 12 + len;
  }
  const int channels = h.color_type == 6 ? 4 : 3;
  const std::size_t stride = static_cast<std::size_t>(h.width) * channels;
  std::vector<unsigned char> raw((stride + 1) * h.height);
  unsigned long raw_len = raw.size();
  if (uncompress(raw.data(), &raw_len, reinterpret_cast<const unsigned char*>(idat.data()), idat.size()) != 0 ||
      raw_len != raw.size()) {
    return std::nullopt;
  }
  Image img;
  img.width = h.width;
  img.height = h.height;
  img.rgba.assign(static_cast<std::size_t>(h.width) * h.height * 4, 255);
  std::vector<unsigned char> prev(stride, 0), cur(stride);
  for (std::uint32_t y = 0; y < h.height; ++y) {
    const unsigned char filter = raw[y * (stride + 1)];
    const unsigned char* src = &raw[y * (stride + 1) + 1];
    for (std::size_t x = 0; x < stride; ++x) {
      const int a = x >= static_cast<std::size_t>(channels) ? cur[x - channels] : 0;
      const int b = prev[x];
      const int c = x >= static_cast<std::size_t>(channels) ? prev[x - channels] : 0;
      int v = src[x];
      switch (filter) {
        case 1: v += a; break;
        case 2: v += b; break;
        case 3: v += (a + b) / 2; break;
        case 4: v += paeth(a, b, c); break;
        default: break;
      }
      cur[x] = static_cast<unsigned char>(v & 0xFF);
    }
    for (std::uint32_t x = 0; x < h.width; ++x) {
      for (int k = 0; k < channels; ++k) img.rgba[(static_cast<std::size_t>(y) * h.width + x) * 4 + k] = cur[x * channels + k];
    }
    std::swap(prev, cur);
  }
  return img;
}

std::size_t Image::count_non_white() const {
  std::size_t n = 0;
  for (std::size_t i = 0; i + 3 < rgba.size(); i += 4) {
    if (rgba[i + 3] > 16 && (rgba[i] < 245 || rgba[i + 1] < 245 || rgba[i + 2] < 245)) ++n;
  }
  return n;
}

std::size_t Image::count_color(const std::string& hex, int tolerance) const {
  const int r = std::stoi(hex.substr(1, 2), nullptr, 16);
  const int g = std::stoi(hex.substr(3, 2), nullptr, 16);
  const int b = std::stoi(hex.substr(5, 2), nullptr, 16);
  std::size_t n = 0;
  for (std::size_t i = 0; i + 3 < rgba.size(); i += 4) {
    if (rgba[i + 3] > 200 && std::abs(rgba[i] - r) <= tolerance && std::abs(rgba[i + 1] - g) <= tolerance &&
        std::abs(rgba[i + 2] - b) <= tolerance) {
      ++n;
    }
  }
  return n;
}

}  // namespace mambamt::results::testing
