# bash completion for qk and its qk-* links.
# Options come from each command's own --help, so they never go stale;
# option values that are fixed lists are completed below.
_qk_words_after() { # print the words of a list-valued option
    case "$1" in
    --raw-encode|--raw-decode|--output-tensor-type|--token-embedding-type)
        qk quant --list-types 2>/dev/null | awk 'NR > 1 && $2 ~ /^[0-9]+$/ {print $1}';;
    --to) echo "ct-fp8 ct-fp8-static ct-fp8-block ct-w8a8 ct-w8a8-static ct-w4a16 ct-w4a8 ct-nvfp4 ct-nvfp4a4 ct-mxfp4 modelopt-nvfp4 mlx-q2 mlx-q3 mlx-q4 mlx-q5 mlx-q6 mlx-q8 bf16 f16 f32";;
    --kv-type|--logits-dtype) echo "f16 f32";;
    --act-type) echo "default f32";;
    --wire) echo "fp32 bf16 fp16 fp8-e4m3 fp8-e5m2 int8-token int4-token int4-group32 mxfp8 mxfp6 mxfp4 nvfp4";;
    --kv-cache) echo "f32 f16 bf16 fp8-e4m3 fp8-e5m2 fp8-e4m3:head fp8-e5m2:head int8 int4 nvfp4";;
    --synthetic) echo "gaussian laplace student-t: outlier-channels";;
    --granularity) echo "tensor channel token group:32 group:64 group:128 block:128x128 none";;
    --kld-base-format) echo "llama qk";;
    --outtype) echo "f32 f16 bf16 q8_0 auto";;
    -o|--output) [ "$sub" = bench ] && echo "md csv json";; # qk-bench's; $sub is _qk's
    --output-format) echo "gguf dat";;
    --method) echo "rtn gptq awq smoothquant smoothquant+gptq";;
    --rotate) echo "hadamard";;
    esac
}
_qk()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local prog=${COMP_WORDS[0]##*/} sub
    if [ "$prog" = qk ]; then
        if [ "$COMP_CWORD" = 1 ]; then
            COMPREPLY=($(compgen -W "$(qk --help 2>/dev/null | awk '/^commands:/ {f = 1; next} f && NF == 0 {f = 0} f {print $1}') --help --version" -- "$cur"))
            return
        fi
        sub=${COMP_WORDS[1]}
    else
        sub=${prog#qk-}
    fi
    if [ "$sub" = report ] && { [ "$prev" = -o ] || [ "$prev" = --output ] || [ "$prev" = --parts ] || [ "$prev" = --merge-dir ]; }; then
        COMPREPLY=($(compgen -d -- "$cur"))
        return
    fi
    local vals
    vals=$(_qk_words_after "$prev")
    if [ -n "$vals" ]; then
        COMPREPLY=($(compgen -W "$vals" -- "$cur"))
        return
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(qk "$sub" --help 2>/dev/null | grep -oE -- '--[a-zA-Z][-a-zA-Z0-9]*' | sort -u)" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}
complete -o filenames -F _qk qk qk-inspect qk-quant qk-run qk-kld qk-bench qk-imatrix qk-convert qk-report
