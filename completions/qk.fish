# fish completion for qk and its qk-* links.  Options come from each
# command's own --help; fixed value lists are below.
function __qk_commands
    qk --help 2>/dev/null | awk '/^commands:/ {f = 1; next} f && NF == 0 {f = 0} f {print $1}'
end
function __qk_options --argument-names sub
    qk $sub --help 2>/dev/null | string match -r -a -- '--[a-zA-Z][-a-zA-Z0-9]*' | sort -u
end
function __qk_types
    qk quant --list-types 2>/dev/null | awk 'NR > 1 && $2 ~ /^[0-9]+$/ {print $1}'
end

complete -c qk -n __fish_use_subcommand -f -a '(__qk_commands)'
for sub in inspect quant run kld bench imatrix convert report
    complete -c qk-$sub -a "(__qk_options $sub)"
    complete -c qk -n "__fish_seen_subcommand_from $sub" -a "(__qk_options $sub)"
end
for c in qk qk-quant
    complete -c $c -l raw-encode -x -a '(__qk_types)'
    complete -c $c -l raw-decode -x -a '(__qk_types)'
    complete -c $c -l output-tensor-type -x -a '(__qk_types)'
    complete -c $c -l token-embedding-type -x -a '(__qk_types)'
    complete -c $c -l method -x -a 'rtn gptq awq smoothquant smoothquant+gptq'
    complete -c $c -l rotate -x -a 'hadamard'
    complete -c $c -l to -x -a 'ct-fp8 ct-fp8-static ct-fp8-block ct-w8a8 ct-w8a8-static ct-w4a16 ct-w4a8 ct-nvfp4 ct-nvfp4a4 ct-mxfp4 modelopt-nvfp4 mlx-q2 mlx-q3 mlx-q4 mlx-q5 mlx-q6 mlx-q8 bf16 f16 f32'
end
for c in qk qk-report
    complete -c $c -l parts -x -a '(__fish_complete_directories)'
    complete -c $c -l merge-dir -x -a '(__fish_complete_directories)'
end
for c in qk qk-run qk-kld qk-report
    complete -c $c -l kv-type -x -a 'f16 f32'
    complete -c $c -l wire -x -a 'fp32 bf16 fp16 fp8-e4m3 fp8-e5m2 int8-token int4-token int4-group32 mxfp8 mxfp6 mxfp4 nvfp4'
    complete -c $c -l kv-cache -x -a 'f32 f16 bf16 fp8-e4m3 fp8-e5m2 fp8-e4m3:head fp8-e5m2:head int8 int4 nvfp4'
end
complete -c qk-run -l logits-dtype -x -a 'f16 f32'
for c in qk qk-imatrix
    complete -c $c -l output-format -x -a 'gguf dat'
end
for c in qk qk-convert
    complete -c $c -l outtype -x -a 'f32 f16 bf16 q8_0 auto'
end
for c in qk qk-run qk-kld qk-bench
    complete -c $c -l act-type -x -a 'default f32'
end
