#include <immintrin.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <x86intrin.h>
static char src[4096] __attribute__((aligned(64))), dst[4096*4] __attribute__((aligned(64)));
static inline uint64_t chain(void){ uint64_t x=3; uint64_t t0=__rdtsc();
  for(int i=0;i<250;i++){ __asm__ volatile("imul %0,%0\n\timul %0,%0\n\timul %0,%0\n\timul %0,%0":"+r"(x)); }
  uint64_t t1=__rdtsc(); __asm__ volatile(""::"r"(x)); return t1-t0; }
__attribute__((target("avx512f,vpclmulqdq"))) static void burst_clmul512(int n){
  __m512i a=_mm512_loadu_si512(src), k=_mm512_loadu_si512(src+64), acc[8];
  for(int j=0;j<8;j++) acc[j]=_mm512_loadu_si512(src+64*j);
  for(int i=0;i<n;i++) for(int j=0;j<8;j++) acc[j]=_mm512_xor_si512(_mm512_clmulepi64_epi128(acc[j],k,0),_mm512_clmulepi64_epi128(acc[j],k,0x11));
  for(int j=0;j<8;j++) _mm512_storeu_si512(dst+64*j,acc[j]); (void)a; }
__attribute__((target("avx2,vpclmulqdq"))) static void burst_clmul256(int n){
  __m256i k=_mm256_loadu_si256((void*)src), acc[8];
  for(int j=0;j<8;j++) acc[j]=_mm256_loadu_si256((void*)(src+32*j));
  for(int i=0;i<n;i++) for(int j=0;j<8;j++) acc[j]=_mm256_xor_si256(_mm256_clmulepi64_epi128(acc[j],k,0),_mm256_clmulepi64_epi128(acc[j],k,0x11));
  for(int j=0;j<8;j++) _mm256_storeu_si256((void*)(dst+32*j),acc[j]); }
__attribute__((target("avx512f"))) static void burst_copy512(void){
  for(int i=0;i<1408;i+=64) _mm512_storeu_si512(dst+i,_mm512_loadu_si512(src+i)); }
int main(int argc,char**argv){
  const char* names[]={"none","copy512","clmul512x3","clmul256x3","clmul512x1"};
  for(int rep=0;rep<3;rep++) for(int v=0;v<5;v++){
    uint64_t best=~0ull, sum=0; int N=50000;
    for(int i=0;i<N;i++){ uint64_t t=chain(); sum+=t; if(t<best)best=t;
      switch(v){case 1: burst_copy512(); break; case 2: burst_clmul512(3); break; case 3: burst_clmul256(3); break; case 4: burst_clmul512(1); break;}
      for(volatile int s=0;s<300;s++); }
    printf("%-12s chain(1000 imul) ticks avg %.1f min %lu\n",names[v],(double)sum/N,best);
  }
}
