"""Reserved words that no generated C or C++ identifier may take, and the file names
byoc's own support C takes beside every module."""

C_KEYWORDS = frozenset(
    """
    auto break case char const continue default do double else enum extern float for
    goto if inline int long register restrict return short signed sizeof static struct
    switch typedef union unsigned void volatile while _Alignas _Alignof _Atomic _Bool
    _Complex _Generic _Imaginary _Noreturn _Static_assert _Thread_local
    alignas alignof and and_eq asm bitand bitor bool catch char16_t char32_t char8_t
    class compl concept consteval constexpr constinit const_cast co_await co_return
    co_yield decltype delete dynamic_cast explicit export false friend mutable namespace
    new noexcept not not_eq nullptr operator or or_eq private protected public
    reinterpret_cast requires static_assert static_cast template this thread_local throw
    true try typeid typename using virtual wchar_t xor xor_eq
    """.split()
)

BYOC_SUPPORT_STEMS = ("byoc_module", "byoc_entry", "byoc_errors", "byoc_workspace", "byoc_pool")
"""The stems of byoc's own support files (``generator/c/support/``: ``byoc_module.h``,
``byoc_entry.c``, ...), which no spec's support file may take: they are written beside
every module."""
