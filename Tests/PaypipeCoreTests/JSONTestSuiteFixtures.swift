import PaypipeCore
import Testing

/// One input from Nicolas Seriot's JSONTestSuite (github.com/nst/JSONTestSuite, `test_parsing/`),
/// named after its file there, with what this parser must make of it.
struct JSONCase: Sendable, CustomTestStringConvertible {
    enum Verdict: Sendable {
        case accept(JSONValue)
        case reject(JSONParseError.Kind)
    }

    let name: String
    let bytes: [UInt8]
    let verdict: Verdict

    var testDescription: String { name }

    static func accept(_ name: String, _ text: String, _ value: JSONValue) -> JSONCase {
        JSONCase(name: name, bytes: Array(text.utf8), verdict: .accept(value))
    }

    static func reject(_ name: String, _ text: String, kind: JSONParseError.Kind = .syntax) -> JSONCase {
        JSONCase(name: name, bytes: Array(text.utf8), verdict: .reject(kind))
    }

    static func reject(_ name: String, bytes: ByteRun..., kind: JSONParseError.Kind = .syntax) -> JSONCase {
        JSONCase(name: name, bytes: bytes.flatMap(\.bytes), verdict: .reject(kind))
    }

    /// The corpus' huge inputs, built here rather than spelled out.
    static func reject(
        _ name: String, repeating unit: String, count: Int, then tail: String = "", kind: JSONParseError.Kind
    ) -> JSONCase {
        JSONCase(name: name, bytes: Array(String(repeating: unit, count: count).utf8) + Array(tail.utf8), verdict: .reject(kind))
    }
}

/// Part of a byte-level input: a string literal stands for its UTF-8, an integer literal for one
/// raw byte (how the invalid-UTF-8 inputs are written).
struct ByteRun: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
    let bytes: [UInt8]
    init(stringLiteral text: String) { bytes = Array(text.utf8) }
    init(integerLiteral byte: UInt8) { bytes = [byte] }
}

enum JSONTestSuite {
    /// `y_*`: valid JSON; each must parse to exactly this value.
    static let mustAccept: [JSONCase] = [
        .accept("y_array_arraysWithSpaces", #"[[]   ]"#, [[]]),
        .accept("y_array_empty-string", #"[""]"#, [""]),
        .accept("y_array_empty", #"[]"#, []),
        .accept("y_array_ending_with_newline", #"["a"]"#, ["a"]),
        .accept("y_array_false", #"[false]"#, [false]),
        .accept("y_array_heterogeneous", #"[null, 1, "1", {}]"#, [nil, 1, "1", [:]]),
        .accept("y_array_null", #"[null]"#, [nil]),
        .accept("y_array_with_1_and_newline", #"[1\#n]"#, [1]),
        .accept("y_array_with_leading_space", #" [1]"#, [1]),
        .accept("y_array_with_several_null", #"[1,null,null,null,2]"#, [1, nil, nil, nil, 2]),
        .accept("y_array_with_trailing_space", #"[2] "#, [2]),
        .accept("y_number", #"[123e65]"#, [.fraction(1.23e+67)]),
        .accept("y_number_0e+1", #"[0e+1]"#, [.fraction(0.0)]),
        .accept("y_number_0e1", #"[0e1]"#, [.fraction(0.0)]),
        .accept("y_number_after_space", #"[ 4]"#, [4]),
        .accept(
            "y_number_double_close_to_zero", #"[-0.000000000000000000000000000000000000000000000000000000000000000000000000000001]\#n"#,
            [.fraction(-1e-78)]),
        .accept("y_number_int_with_exp", #"[20e1]"#, [.fraction(200.0)]),
        .accept("y_number_minus_zero", #"[-0]"#, [0]),
        .accept("y_number_negative_int", #"[-123]"#, [-123]),
        .accept("y_number_negative_one", #"[-1]"#, [-1]),
        .accept("y_number_negative_zero", #"[-0]"#, [0]),
        .accept("y_number_real_capital_e", #"[1E22]"#, [.fraction(1e+22)]),
        .accept("y_number_real_capital_e_neg_exp", #"[1E-2]"#, [.fraction(0.01)]),
        .accept("y_number_real_capital_e_pos_exp", #"[1E+2]"#, [.fraction(100.0)]),
        .accept("y_number_real_exponent", #"[123e45]"#, [.fraction(1.23e+47)]),
        .accept("y_number_real_fraction_exponent", #"[123.456e78]"#, [.fraction(1.23456e+80)]),
        .accept("y_number_real_neg_exp", #"[1e-2]"#, [.fraction(0.01)]),
        .accept("y_number_real_pos_exponent", #"[1e+2]"#, [.fraction(100.0)]),
        .accept("y_number_simple_int", #"[123]"#, [123]),
        .accept("y_number_simple_real", #"[123.456789]"#, [.fraction(123.456789)]),
        .accept("y_object", #"{"asd":"sdf", "dfg":"fgh"}"#, ["asd": "sdf", "dfg": "fgh"]),
        .accept("y_object_basic", #"{"asd":"sdf"}"#, ["asd": "sdf"]),
        // Deliberate deviation: RFC 8259 only says names SHOULD be unique, so the corpus counts these
        // as valid; a payment parser rejects them, since two readers could otherwise disagree about
        // which value counts (first wins in some parsers, last in others).
        .reject("y_object_duplicated_key", #"{"a":"b","a":"c"}"#, kind: .duplicateKey),
        .reject("y_object_duplicated_key_and_value", #"{"a":"b","a":"b"}"#, kind: .duplicateKey),
        .accept("y_object_empty", #"{}"#, [:]),
        .accept("y_object_empty_key", #"{"":0}"#, ["": 0]),
        .accept("y_object_escaped_null_in_key", #"{"foo\u0000bar": 42}"#, ["foo\u{0}bar": 42]),
        .accept("y_object_extreme_numbers", #"{ "min": -1.0e+28, "max": 1.0e+28 }"#, ["min": .fraction(-1e+28), "max": .fraction(1e+28)]),
        .accept(
            "y_object_long_strings", #"{"x":[{"id": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}], "id": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}"#,
            ["x": [["id": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"]], "id": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"]),
        .accept("y_object_simple", #"{"a":[]}"#, ["a": []]),
        .accept(
            "y_object_string_unicode",
            #"{"title":"\u041f\u043e\u043b\u0442\u043e\u0440\u0430 \u0417\u0435\u043c\u043b\u0435\u043a\u043e\u043f\u0430" }"#,
            ["title": "\u{41F}\u{43E}\u{43B}\u{442}\u{43E}\u{440}\u{430} \u{417}\u{435}\u{43C}\u{43B}\u{435}\u{43A}\u{43E}\u{43F}\u{430}"]),
        .accept("y_object_with_newlines", #"{\#n"a": "b"\#n}"#, ["a": "b"]),
        .accept("y_string_1_2_3_bytes_UTF-8_sequences", #"["\u0060\u012a\u12AB"]"#, ["`\u{12A}\u{12AB}"]),
        .accept("y_string_accepted_surrogate_pair", #"["\uD801\udc37"]"#, ["\u{10437}"]),
        .accept("y_string_accepted_surrogate_pairs", #"["\ud83d\ude39\ud83d\udc8d"]"#, ["\u{1F639}\u{1F48D}"]),
        .accept("y_string_allowed_escapes", #"["\"\\\/\b\f\n\r\t"]"#, ["\"\\/\u{8}\u{C}\u{A}\u{D}\u{9}"]),
        .accept("y_string_backslash_and_u_escaped_zero", #"["\\u0000"]"#, ["\\u0000"]),
        .accept("y_string_backslash_doublequotes", #"["\""]"#, ["\""]),
        .accept("y_string_comments", #"["a/*b*/c/*d//e"]"#, ["a/*b*/c/*d//e"]),
        .accept("y_string_double_escape_a", #"["\\a"]"#, ["\\a"]),
        .accept("y_string_double_escape_n", #"["\\n"]"#, ["\\n"]),
        .accept("y_string_escaped_control_character", #"["\u0012"]"#, ["\u{12}"]),
        .accept("y_string_escaped_noncharacter", #"["\uFFFF"]"#, ["\u{FFFF}"]),
        .accept("y_string_in_array", #"["asd"]"#, ["asd"]),
        .accept("y_string_in_array_with_leading_space", #"[ "asd"]"#, ["asd"]),
        .accept("y_string_last_surrogates_1_and_2", #"["\uDBFF\uDFFF"]"#, ["\u{10FFFF}"]),
        .accept("y_string_nbsp_uescaped", #"["new\u00A0line"]"#, ["new\u{A0}line"]),
        .accept("y_string_nonCharacterInUTF-8_U+10FFFF", #"["\#u{10FFFF}"]"#, ["\u{10FFFF}"]),
        .accept("y_string_nonCharacterInUTF-8_U+FFFF", #"["\#u{FFFF}"]"#, ["\u{FFFF}"]),
        .accept("y_string_null_escape", #"["\u0000"]"#, ["\u{0}"]),
        .accept("y_string_one-byte-utf-8", #"["\u002c"]"#, [","]),
        .accept("y_string_pi", #"["\#u{3C0}"]"#, ["\u{3C0}"]),
        .accept("y_string_reservedCharacterInUTF-8_U+1BFFF", #"["\#u{1BFFF}"]"#, ["\u{1BFFF}"]),
        .accept("y_string_simple_ascii", #"["asd "]"#, ["asd "]),
        .accept("y_string_space", "\" \"", " "),
        .accept("y_string_surrogates_U+1D11E_MUSICAL_SYMBOL_G_CLEF", #"["\uD834\uDd1e"]"#, ["\u{1D11E}"]),
        .accept("y_string_three-byte-utf-8", #"["\u0821"]"#, ["\u{821}"]),
        .accept("y_string_two-byte-utf-8", #"["\u0123"]"#, ["\u{123}"]),
        .accept("y_string_u+2028_line_sep", #"["\#u{2028}"]"#, ["\u{2028}"]),
        .accept("y_string_u+2029_par_sep", #"["\#u{2029}"]"#, ["\u{2029}"]),
        .accept("y_string_uEscape", #"["\u0061\u30af\u30EA\u30b9"]"#, ["a\u{30AF}\u{30EA}\u{30B9}"]),
        .accept("y_string_uescaped_newline", #"["new\u000Aline"]"#, ["new\u{A}line"]),
        .accept("y_string_unescaped_char_delete", #"["\#u{7F}"]"#, ["\u{7F}"]),
        .accept("y_string_unicode", #"["\uA66D"]"#, ["\u{A66D}"]),
        .accept("y_string_unicodeEscapedBackslash", #"["\u005C"]"#, ["\\"]),
        .accept("y_string_unicode_2", #"["\#u{2342}\#u{3234}\#u{2342}"]"#, ["\u{2342}\u{3234}\u{2342}"]),
        .accept("y_string_unicode_U+10FFFE_nonchar", #"["\uDBFF\uDFFE"]"#, ["\u{10FFFE}"]),
        .accept("y_string_unicode_U+1FFFE_nonchar", #"["\uD83F\uDFFE"]"#, ["\u{1FFFE}"]),
        .accept("y_string_unicode_U+200B_ZERO_WIDTH_SPACE", #"["\u200B"]"#, ["\u{200B}"]),
        .accept("y_string_unicode_U+2064_invisible_plus", #"["\u2064"]"#, ["\u{2064}"]),
        // The compiler refuses "\u{FDD0}" in a literal, so the scalar is built.
        .accept("y_string_unicode_U+FDD0_nonchar", #"["\uFDD0"]"#, [.string(String(Unicode.Scalar(0xFDD0 as UInt32)!))]),
        .accept("y_string_unicode_U+FFFE_nonchar", #"["\uFFFE"]"#, ["\u{FFFE}"]),
        .accept("y_string_unicode_escaped_double_quote", #"["\u0022"]"#, ["\""]),
        .accept("y_string_utf8", #"["\#u{20AC}\#u{1D11E}"]"#, ["\u{20AC}\u{1D11E}"]),
        .accept("y_string_with_del_character", #"["a\#u{7F}a"]"#, ["a\u{7F}a"]),
        .accept("y_structure_lonely_false", #"false"#, false),
        .accept("y_structure_lonely_int", #"42"#, 42),
        .accept("y_structure_lonely_negative_real", #"-0.1"#, .fraction(-0.1)),
        .accept("y_structure_lonely_null", #"null"#, nil),
        .accept("y_structure_lonely_string", "\"asd\"", "asd"),
        .accept("y_structure_lonely_true", #"true"#, true),
        .accept("y_structure_string_empty", "\"\"", ""),
        .accept("y_structure_trailing_newline", #"["a"]\#n"#, ["a"]),
        .accept("y_structure_true_in_array", #"[true]"#, [true]),
        .accept("y_structure_whitespace_array", #" [] "#, []),
    ]

    /// `n_*`: not JSON; each must be rejected (the kind says which check catches it).
    static let mustReject: [JSONCase] = [
        .reject("n_array_1_true_without_comma", #"[1 true]"#),
        .reject("n_array_a_invalid_utf8", bytes: #"[a"#, 0xE5, #"]"#),
        .reject("n_array_colon_instead_of_comma", #"["": 1]"#),
        .reject("n_array_comma_after_close", #"[""],"#),
        .reject("n_array_comma_and_number", #"[,1]"#),
        .reject("n_array_double_comma", #"[1,,2]"#),
        .reject("n_array_double_extra_comma", #"["x",,]"#),
        .reject("n_array_extra_close", #"["x"]]"#),
        .reject("n_array_extra_comma", #"["",]"#),
        .reject("n_array_incomplete", #"["x""#),
        .reject("n_array_incomplete_invalid_value", #"[x"#),
        .reject("n_array_inner_array_no_comma", #"[3[4]]"#),
        .reject("n_array_invalid_utf8", bytes: #"["#, 0xFF, #"]"#),
        .reject("n_array_items_separated_by_semicolon", #"[1:2]"#),
        .reject("n_array_just_comma", #"[,]"#),
        .reject("n_array_just_minus", #"[-]"#),
        .reject("n_array_missing_value", #"[   , ""]"#),
        .reject("n_array_newlines_unclosed", #"["a",\#n4\#n,1,"#),
        .reject("n_array_number_and_comma", #"[1,]"#),
        .reject("n_array_number_and_several_commas", #"[1,,]"#),
        .reject("n_array_spaces_vertical_tab_formfeed", #"["\#u{B}a"\f]"#),
        .reject("n_array_star_inside", #"[*]"#),
        .reject("n_array_unclosed", #"["""#),
        .reject("n_array_unclosed_trailing_comma", #"[1,"#),
        .reject("n_array_unclosed_with_new_lines", #"[1,\#n1\#n,1"#),
        .reject("n_array_unclosed_with_object_inside", #"[{}"#),
        .reject("n_incomplete_false", #"[fals]"#),
        .reject("n_incomplete_null", #"[nul]"#),
        .reject("n_incomplete_true", #"[tru]"#),
        .reject("n_multidigit_number_then_00", #"123\#u{0}"#),
        .reject("n_number_++", #"[++1234]"#),
        .reject("n_number_+1", #"[+1]"#),
        .reject("n_number_+Inf", #"[+Inf]"#),
        .reject("n_number_-01", #"[-01]"#),
        .reject("n_number_-1.0.", #"[-1.0.]"#),
        .reject("n_number_-2.", #"[-2.]"#),
        .reject("n_number_-NaN", #"[-NaN]"#),
        .reject("n_number_.-1", #"[.-1]"#),
        .reject("n_number_.2e-3", #"[.2e-3]"#),
        .reject("n_number_0.1.2", #"[0.1.2]"#),
        .reject("n_number_0.3e+", #"[0.3e+]"#),
        .reject("n_number_0.3e", #"[0.3e]"#),
        .reject("n_number_0.e1", #"[0.e1]"#),
        .reject("n_number_0_capital_E+", #"[0E+]"#),
        .reject("n_number_0_capital_E", #"[0E]"#),
        .reject("n_number_0e+", #"[0e+]"#),
        .reject("n_number_0e", #"[0e]"#),
        .reject("n_number_1.0e+", #"[1.0e+]"#),
        .reject("n_number_1.0e-", #"[1.0e-]"#),
        .reject("n_number_1.0e", #"[1.0e]"#),
        .reject("n_number_1_000", #"[1 000.0]"#),
        .reject("n_number_1eE2", #"[1eE2]"#),
        .reject("n_number_2.e+3", #"[2.e+3]"#),
        .reject("n_number_2.e-3", #"[2.e-3]"#),
        .reject("n_number_2.e3", #"[2.e3]"#),
        .reject("n_number_9.e+", #"[9.e+]"#),
        .reject("n_number_Inf", #"[Inf]"#),
        .reject("n_number_NaN", #"[NaN]"#),
        .reject("n_number_U+FF11_fullwidth_digit_one", #"[\#u{FF11}]"#),
        .reject("n_number_expression", #"[1+2]"#),
        .reject("n_number_hex_1_digit", #"[0x1]"#),
        .reject("n_number_hex_2_digits", #"[0x42]"#),
        .reject("n_number_infinity", #"[Infinity]"#),
        .reject("n_number_invalid+-", #"[0e+-1]"#),
        .reject("n_number_invalid-negative-real", #"[-123.123foo]"#),
        .reject("n_number_invalid-utf-8-in-bigger-int", bytes: #"[123"#, 0xE5, #"]"#),
        .reject("n_number_invalid-utf-8-in-exponent", bytes: #"[1e1"#, 0xE5, #"]"#),
        .reject("n_number_invalid-utf-8-in-int", bytes: #"[0"#, 0xE5, #"]"#, 0x0A),
        .reject("n_number_minus_infinity", #"[-Infinity]"#),
        .reject("n_number_minus_sign_with_trailing_garbage", #"[-foo]"#),
        .reject("n_number_minus_space_1", #"[- 1]"#),
        .reject("n_number_neg_int_starting_with_zero", #"[-012]"#),
        .reject("n_number_neg_real_without_int_part", #"[-.123]"#),
        .reject("n_number_neg_with_garbage_at_end", #"[-1x]"#),
        .reject("n_number_real_garbage_after_e", #"[1ea]"#),
        .reject("n_number_real_with_invalid_utf8_after_e", bytes: #"[1e"#, 0xE5, #"]"#),
        .reject("n_number_real_without_fractional_part", #"[1.]"#),
        .reject("n_number_starting_with_dot", #"[.123]"#),
        .reject("n_number_with_alpha", #"[1.2a-3]"#),
        .reject("n_number_with_alpha_char", #"[1.8011670033376514H-308]"#),
        .reject("n_number_with_leading_zero", #"[012]"#),
        .reject("n_object_bad_value", #"["x", truth]"#),
        .reject("n_object_bracket_key", #"{[: "x"}\#n"#),
        .reject("n_object_comma_instead_of_colon", #"{"x", null}"#),
        .reject("n_object_double_colon", #"{"x"::"b"}"#),
        .reject("n_object_emoji", #"{\#u{1F1E8}\#u{1F1ED}}"#),
        .reject("n_object_garbage_at_end", #"{"a":"a" 123}"#),
        .reject("n_object_key_with_single_quotes", #"{key: 'value'}"#),
        .reject("n_object_lone_continuation_byte_in_key_and_trailing_comma", bytes: #"{""#, 0xB9, #"":"0",}"#, kind: .invalidUTF8),
        .reject("n_object_missing_colon", #"{"a" b}"#),
        .reject("n_object_missing_key", #"{:"b"}"#),
        .reject("n_object_missing_semicolon", #"{"a" "b"}"#),
        .reject("n_object_missing_value", #"{"a":"#),
        .reject("n_object_no-colon", #"{"a""#),
        .reject("n_object_non_string_key", #"{1:1}"#),
        .reject("n_object_non_string_key_but_huge_number_instead", #"{9999E9999:1}"#),
        .reject("n_object_repeated_null_null", #"{null:null,null:null}"#),
        .reject("n_object_several_trailing_commas", #"{"id":0,,,,,}"#),
        .reject("n_object_single_quote", #"{'a':0}"#),
        .reject("n_object_trailing_comma", #"{"id":0,}"#),
        .reject("n_object_trailing_comment", #"{"a":"b"}/**/"#),
        .reject("n_object_trailing_comment_open", #"{"a":"b"}/**//"#),
        .reject("n_object_trailing_comment_slash_open", #"{"a":"b"}//"#),
        .reject("n_object_trailing_comment_slash_open_incomplete", #"{"a":"b"}/"#),
        .reject("n_object_two_commas_in_a_row", #"{"a":"b",,"c":"d"}"#),
        .reject("n_object_unquoted_key", #"{a: "b"}"#),
        .reject("n_object_unterminated-value", #"{"a":"a"#),
        .reject("n_object_with_single_string", #"{ "foo" : "bar", "a" }"#),
        .reject("n_object_with_trailing_garbage", #"{"a":"b"}#"#),
        .reject("n_single_space", #" "#),
        .reject("n_string_1_surrogate_then_escape", #"["\uD800\"]"#),
        .reject("n_string_1_surrogate_then_escape_u", #"["\uD800\u"]"#),
        .reject("n_string_1_surrogate_then_escape_u1", #"["\uD800\u1"]"#),
        .reject("n_string_1_surrogate_then_escape_u1x", #"["\uD800\u1x"]"#),
        .reject("n_string_accentuated_char_no_quotes", #"[\#u{E9}]"#),
        .reject("n_string_backslash_00", bytes: #"["\"#, 0x00, #""]"#),
        .reject("n_string_escape_x", #"["\x00"]"#),
        .reject("n_string_escaped_backslash_bad", #"["\\\"]"#),
        .reject("n_string_escaped_ctrl_char_tab", #"["\\#t"]"#),
        .reject("n_string_escaped_emoji", bytes: #"["\"#, 0xF0, 0x9F, 0x8C, 0x80, #""]"#),
        .reject("n_string_incomplete_escape", #"["\"]"#),
        .reject("n_string_incomplete_escaped_character", #"["\u00A"]"#),
        .reject("n_string_incomplete_surrogate", #"["\uD834\uDd"]"#),
        .reject("n_string_incomplete_surrogate_escape_invalid", #"["\uD800\uD800\x"]"#),
        .reject("n_string_invalid-utf-8-in-escape", bytes: #"["\u"#, 0xE5, #""]"#),
        .reject("n_string_invalid_backslash_esc", #"["\a"]"#),
        .reject("n_string_invalid_unicode_escape", #"["\uqqqq"]"#),
        .reject("n_string_invalid_utf8_after_escape", bytes: #"["\"#, 0xE5, #""]"#),
        .reject("n_string_leading_uescaped_thinspace", #"[\u0020"asd"]"#),
        .reject("n_string_no_quotes_with_bad_escape", #"[\n]"#),
        .reject("n_string_single_doublequote", "\""),
        .reject("n_string_single_quote", #"['single quote']"#),
        .reject("n_string_single_string_no_double_quotes", #"abc"#),
        .reject("n_string_start_escape_unclosed", #"["\"#),
        .reject("n_string_unescaped_ctrl_char", #"["a\#u{0}a"]"#),
        .reject("n_string_unescaped_newline", #"["new\#nline"]"#),
        .reject("n_string_unescaped_tab", #"["\#t"]"#),
        .reject("n_string_unicode_CapitalU", "\"\\UA66D\""),
        .reject("n_string_with_trailing_garbage", "\"\"x"),
        .reject("n_structure_100000_opening_arrays", repeating: "[", count: 100_000, kind: .tooDeep),
        .reject("n_structure_U+2060_word_joined", #"[\#u{2060}]"#),
        .reject("n_structure_UTF8_BOM_no_data", bytes: 0xEF, 0xBB, 0xBF),
        .reject("n_structure_angle_bracket_.", #"<.>"#),
        .reject("n_structure_angle_bracket_null", #"[<null>]"#),
        .reject("n_structure_array_trailing_garbage", #"[1]x"#),
        .reject("n_structure_array_with_extra_array_close", #"[1]]"#),
        .reject("n_structure_array_with_unclosed_string", #"["asd]"#),
        .reject("n_structure_ascii-unicode-identifier", #"a\#u{E5}"#),
        .reject("n_structure_capitalized_True", #"[True]"#),
        .reject("n_structure_close_unopened_array", #"1]"#),
        .reject("n_structure_comma_instead_of_closing_brace", #"{"x": true,"#),
        .reject("n_structure_double_array", #"[][]"#),
        .reject("n_structure_end_array", #"]"#),
        .reject("n_structure_incomplete_UTF8_BOM", bytes: 0xEF, 0xBB, #"{}"#),
        .reject("n_structure_lone-invalid-utf-8", bytes: 0xE5),
        .reject("n_structure_lone-open-bracket", #"["#),
        .reject("n_structure_no_data", #""#),
        .reject("n_structure_null-byte-outside-string", #"[\#u{0}]"#),
        .reject("n_structure_number_with_trailing_garbage", #"2@"#),
        .reject("n_structure_object_followed_by_closing_object", #"{}}"#),
        .reject("n_structure_object_unclosed_no_value", #"{"":"#),
        .reject("n_structure_object_with_comment", #"{"a":/*comment*/"b"}"#),
        .reject("n_structure_object_with_trailing_garbage", #"{"a": true} "x""#),
        .reject("n_structure_open_array_apostrophe", #"['"#),
        .reject("n_structure_open_array_comma", #"[,"#),
        .reject("n_structure_open_array_object", repeating: #"[{"":"#, count: 50_000, then: "\n", kind: .tooDeep),
        .reject("n_structure_open_array_open_object", #"[{"#),
        .reject("n_structure_open_array_open_string", #"["a"#),
        .reject("n_structure_open_array_string", #"["a""#),
        .reject("n_structure_open_object", #"{"#),
        .reject("n_structure_open_object_close_array", #"{]"#),
        .reject("n_structure_open_object_comma", #"{,"#),
        .reject("n_structure_open_object_open_array", #"{["#),
        .reject("n_structure_open_object_open_string", #"{"a"#),
        .reject("n_structure_open_object_string_with_apostrophes", #"{'a'"#),
        .reject("n_structure_open_open", #"["\{["\{["\{["\{"#),
        .reject("n_structure_single_eacute", bytes: 0xE9),
        .reject("n_structure_single_star", #"*"#),
        .reject("n_structure_trailing_#", #"{"a":"b"}#{}"#),
        .reject("n_structure_uescaped_LF_before_string", #"[\u000A""]"#),
        .reject("n_structure_unclosed_array", #"[1"#),
        .reject("n_structure_unclosed_array_partial_null", #"[ false, nul"#),
        .reject("n_structure_unclosed_array_unfinished_false", #"[ true, fals"#),
        .reject("n_structure_unclosed_array_unfinished_true", #"[ false, tru"#),
        .reject("n_structure_unclosed_object", #"{"asd":"asd""#),
        .reject("n_structure_unicode-identifier", #"\#u{E5}"#),
        .reject("n_structure_whitespace_U+2060_word_joiner", #"[\#u{2060}]"#),
        .reject("n_structure_whitespace_formfeed", #"[\#u{C}]"#),
    ]

    /// `i_*`: RFC 8259 leaves these to the implementation. Each entry is this parser's choice; the
    /// comment above each group says why.
    static let implementationDefined: [JSONCase] = [
        // Beyond Int64 but within Double: kept as the nearest fraction. `.integer` cannot hold them,
        // and as fractions every "must be an integer" rule (amounts) still refuses them rather than
        // using a rounded value, while a document that merely carries a big id-like number elsewhere
        // still parses.
        .accept("i_number_too_big_neg_int", #"[-123123123123123123123123123123]"#, [.fraction(-1.2312312312312312e+29)]),
        .accept("i_number_too_big_pos_int", #"[100000000000000000000]"#, [.fraction(1e+20)]),
        .accept(
            "i_number_very_big_negative_int", #"[-237462374673276894279832749832423479823246327846]"#,
            [.fraction(-2.374623746732769e+47)]),

        // Underflow: rounds to zero as IEEE 754 does. Still a fraction, so no integer field takes it,
        // and it serializes and re-parses to the same value.
        .accept("i_number_double_huge_neg_exp", #"[123.456e-789]"#, [.fraction(0.0)]),
        .accept("i_number_real_underflow", #"[123e-10000000]"#, [.fraction(0.0)]),

        // Overflow: the value would be ±infinity, which JSON cannot express (it would serialize as
        // null), so the number is refused instead of silently changed.
        .reject(
            "i_number_huge_exp",
            #"[0.4e00669999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999969999999006]"#
        ),
        .reject("i_number_neg_int_huge_exp", #"[-1e+9999]"#),
        .reject("i_number_pos_double_huge_exp", #"[1.5e+9999]"#),
        .reject("i_number_real_neg_overflow", #"[-123123e100000]"#),
        .reject("i_number_real_pos_overflow", #"[123123e100000]"#),

        // Unpaired UTF-16 surrogate escapes: a Swift String cannot hold a lone surrogate, and putting
        // U+FFFD in its place would change the text (two readers could then disagree), so reject.
        .reject("i_object_key_lone_2nd_surrogate", #"{"\uDFAA":0}"#),
        .reject("i_string_1st_surrogate_but_2nd_missing", #"["\uDADA"]"#),
        .reject("i_string_1st_valid_surrogate_2nd_invalid", #"["\uD888\u1234"]"#),
        .reject("i_string_incomplete_surrogate_and_escape_valid", #"["\uD800\n"]"#),
        .reject("i_string_incomplete_surrogate_pair", #"["\uDd1ea"]"#),
        .reject("i_string_incomplete_surrogates_escape_valid", #"["\uD800\uD800\n"]"#),
        .reject("i_string_invalid_lonely_surrogate", #"["\ud800"]"#),
        .reject("i_string_invalid_surrogate", #"["\ud800abc"]"#),
        .reject("i_string_inverted_surrogates_U+1D11E", #"["\uDd1e\uD834"]"#),
        .reject("i_string_lone_second_surrogate", #"["\uDFAA"]"#),

        // Invalid UTF-8 inside a string: RFC 8259 §8.1 requires UTF-8, and repairing the bytes would
        // change the data. Overlong forms, encoded surrogates and code points past U+10FFFF included.
        .reject("i_string_UTF-8_invalid_sequence", bytes: #"[""#, 0xE6, 0x97, 0xA5, 0xD1, 0x88, 0xFA, #""]"#, kind: .invalidUTF8),
        .reject("i_string_UTF8_surrogate_U+D800", bytes: #"[""#, 0xED, 0xA0, 0x80, #""]"#, kind: .invalidUTF8),
        .reject("i_string_invalid_utf-8", bytes: #"[""#, 0xFF, #""]"#, kind: .invalidUTF8),
        .reject("i_string_iso_latin_1", bytes: #"[""#, 0xE9, #""]"#, kind: .invalidUTF8),
        .reject("i_string_lone_utf8_continuation_byte", bytes: #"[""#, 0x81, #""]"#, kind: .invalidUTF8),
        .reject("i_string_not_in_unicode_range", bytes: #"[""#, 0xF4, 0xBF, 0xBF, 0xBF, #""]"#, kind: .invalidUTF8),
        .reject("i_string_overlong_sequence_2_bytes", bytes: #"[""#, 0xC0, 0xAF, #""]"#, kind: .invalidUTF8),
        .reject("i_string_overlong_sequence_6_bytes", bytes: #"[""#, 0xFC, 0x83, 0xBF, 0xBF, 0xBF, 0xBF, #""]"#, kind: .invalidUTF8),
        .reject("i_string_overlong_sequence_6_bytes_null", bytes: #"[""#, 0xFC, 0x80, 0x80, 0x80, 0x80, 0x80, #""]"#, kind: .invalidUTF8),
        .reject("i_string_truncated-utf-8", bytes: #"[""#, 0xE0, 0xFF, #""]"#, kind: .invalidUTF8),

        // UTF-16 input (`["é"]`): RFC 8259 §8.1 says JSON exchanged between systems MUST be UTF-8;
        // the parser reads bytes and does not sniff encodings.
        .reject("i_string_UTF-16LE_with_BOM", bytes: 0xFF, 0xFE, 0x5B, 0x00, 0x22, 0x00, 0xE9, 0x00, 0x22, 0x00, 0x5D, 0x00),
        .reject("i_string_utf16BE_no_BOM", bytes: 0x00, 0x5B, 0x00, 0x22, 0x00, 0xE9, 0x00, 0x22, 0x00, 0x5D),
        .reject("i_string_utf16LE_no_BOM", bytes: 0x5B, 0x00, 0x22, 0x00, 0xE9, 0x00, 0x22, 0x00, 0x5D, 0x00),

        // UTF-8 byte order mark: RFC 8259 §8.1 forbids senders to add one and only allows parsers to
        // ignore it. Refused, so that a frame has one reading and a misbehaving producer shows up.
        .reject("i_structure_UTF-8_BOM_empty_object", bytes: 0xEF, 0xBB, 0xBF, "{}"),

        // Nesting: the default limit is 64 containers (real payment documents nest a handful deep),
        // which bounds the recursion an untrusted frame can cause.
        .reject("i_structure_500_nested_arrays", repeating: "[", count: 500, then: String(repeating: "]", count: 500), kind: .tooDeep),
    ]
}
