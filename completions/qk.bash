# bash completion for qk and its qk-* links
_qk_types() { qk quant --list-types 2>/dev/null | awk 'NR>1 {print $1}'; }
_qk()
{
    local cur prev cmd
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    cmd=${COMP_WORDS[0]##*/}
    local shift=0
    if [ "$cmd" = qk ]; then
        if [ "$COMP_CWORD" = 1 ]; then
            COMPREPLY=($(compgen -W "inspect quant help --help --version" -- "$cur")); return
        fi
        cmd=qk-${COMP_WORDS[1]}
    fi
    case "$cmd" in
    qk-inspect)
        case "$prev" in --tensors|--meta|--max-rmse|--min-snr|-t|--threads) return;; esac
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "--tensors --meta --meta-full --stats --diff --max-rmse --min-snr --json --threads --quiet --help" -- "$cur"))
        else
            COMPREPLY=($(compgen -f -- "$cur"))
        fi;;
    qk-quant)
        case "$prev" in
        --raw-encode|--raw-decode) COMPREPLY=($(compgen -W "$(_qk_types)" -- "$cur")); return;;
        --shape|-t|--threads) return;;
        esac
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "--list-types --raw-encode --raw-decode --shape --imatrix --json --threads --quiet --help" -- "$cur"))
        else
            COMPREPLY=($(compgen -f -- "$cur"))
        fi;;
    esac
}
complete -o filenames -F _qk qk qk-inspect qk-quant
